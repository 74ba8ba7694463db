package dev.sluice.mongodb.lease;

import com.mongodb.WriteConcern;
import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;

/**
 * A {@link LeaseStore} on MongoDB: one document per lease name in one collection, every state
 * change a single-document conditional write (see {@code docs/adr/0010-mongodb-lease-document.md}).
 *
 * <p>Document shape: {@code {_id: name, owner, epoch, expiresAt, checkpoint: {token, time},
 * touchedAt}}. Expiry is judged on the server's clock ({@code docs/adr/0011-mongodb-lease-clock.md});
 * the store has no process-clock input at all, so a skewed process clock cannot affect it.
 *
 * <pre>{@code
 * LeaseStore store = MongoLeaseStore.builder(client.getDatabase("app")).build();
 * }</pre>
 */
public interface MongoLeaseStore extends LeaseStore {

  /** The default collection name. */
  String DEFAULT_COLLECTION = "sluice_leases";

  /** Starts a builder for a store in {@code database}. */
  static Builder builder(MongoDatabase database) {
    return new Builder(database);
  }

  /** Name of the collection holding the lease documents. */
  String collectionName();

  /** Configures a {@link MongoLeaseStore}. */
  final class Builder {
    private final MongoDatabase database;
    private String collection = DEFAULT_COLLECTION;
    private WriteConcern writeConcern = WriteConcern.MAJORITY;
    private Duration expireUnusedAfter;

    private Builder(MongoDatabase database) {
      this.database = ConfigurationException.requireNonNull(database, "database");
    }

    /** Collection for the lease documents; default {@value #DEFAULT_COLLECTION}. */
    public Builder collection(String name) {
      ConfigurationException.require(
          name != null && !name.isBlank() && !name.contains("$"),
          "collection",
          name,
          "must be a non-blank collection name without '$'");
      this.collection = name;
      return this;
    }

    /**
     * Write concern of every lease write; default {@code MAJORITY}, so that an acquisition or a
     * checkpoint survives a failover. Weaker concerns let a rolled-back write hand a lease to two
     * owners: only for tests.
     */
    public Builder writeConcern(WriteConcern concern) {
      this.writeConcern = ConfigurationException.requireNonNull(concern, "writeConcern");
      ConfigurationException.require(
          concern.isAcknowledged(), "writeConcern", concern, "must be acknowledged");
      return this;
    }

    /**
     * Optional clean-up: a TTL index deletes lease documents untouched for {@code idle} (a safety
     * net for lock names used once). Deleting a document also deletes its checkpoint, so never
     * use it for listener leases whose checkpoint must survive idle periods. Epochs stay strictly
     * increasing after a deletion (see ADR 0010). Default: no clean-up.
     */
    public Builder expireUnusedAfter(Duration idle) {
      ConfigurationException.requireNonNull(idle, "expireUnusedAfter");
      ConfigurationException.require(
          idle.compareTo(Duration.ofMinutes(1)) >= 0,
          "expireUnusedAfter",
          idle,
          "must be at least one minute (far longer than any lease)");
      this.expireUnusedAfter = idle;
      return this;
    }

    /** Builds the store and creates the TTL index if clean-up was asked for. */
    public MongoLeaseStore build() {
      return new DefaultMongoLeaseStore(database, collection, writeConcern, expireUnusedAfter);
    }
  }
}
