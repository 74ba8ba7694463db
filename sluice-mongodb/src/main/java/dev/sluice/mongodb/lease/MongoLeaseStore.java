package dev.sluice.mongodb.lease;

import com.mongodb.WriteConcern;
import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * A {@link LeaseStore} on MongoDB: one document per lease name in one collection, every state
 * change a single-document conditional write (see {@code docs/adr/0010-mongodb-lease-document.md}).
 *
 * <p>Document shape: {@code {_id: name, owner, epoch, renewedAt, duration, renewedEpoch, askedAt,
 * expiresAt, checkpoint: {token, time}, touchedAt, disposable, idleSince}} ({@code disposable} and
 * {@code idleSince} drive the optional clean-up, see {@link Builder#expireUnusedAfter}). Expiry is
 * {@code renewedAt + duration}, both set and judged on the clock of the shard holding the document:
 * every decision stamps the document with {@code $currentDate}, which the shard evaluates (never
 * {@code $$NOW}, which a mongos router resolves from its own clock), and acts only on the document
 * as stamped ({@code docs/adr/0083-mongodb-lease-decisions-on-the-shards-stamp.md}). The store has
 * no process-clock input, so neither a skewed process clock nor a skewed router can affect it.
 *
 * <pre>{@code
 * LeaseStore store = MongoLeaseStore.builder(client.getDatabase("app")).build();
 * }</pre>
 */
public interface MongoLeaseStore extends LeaseStore {

  /** The shortest idle period {@link Builder#expireUnusedAfter} accepts. */
  Duration MIN_IDLE = Duration.ofHours(1);

  /** The default collection name. */
  String DEFAULT_COLLECTION = "sluice_leases";

  /** Starts a builder for a store in {@code database}. */
  static Builder builder(MongoDatabase database) {
    return new Builder(database);
  }

  /** Name of the collection holding the lease documents. */
  String collectionName();

  /** Default of {@link Builder#operationTimeout}. */
  Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(10);

  /** Configures a {@link MongoLeaseStore}. */
  final class Builder {
    private final MongoDatabase database;
    private String collection = DEFAULT_COLLECTION;
    private WriteConcern writeConcern = WriteConcern.MAJORITY;
    private Duration expireUnusedAfter;
    private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;

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
     * Optional clean-up of records nobody needs any more: a TTL index
     * ({@code sluice_idle_disposable_ttl} on {@code idleSince}, partial on {@code disposable:
     * true}) lets the server delete a lease document once it has been idle for {@code idle}.
     * Default: no clean-up.
     *
     * <p><b>What is cleaned</b>: documents that never held a checkpoint (lock records,
     * listener membership records, partitions of a group that never committed) and that nobody
     * has held for {@code idle}: released {@code idle} ago, or expired {@code idle} ago (a
     * crashed holder). {@code idleSince} is the lease's expiry while it is held, moved forward
     * by every acquisition and renewal, and the release time once released.
     *
     * <p><b>What is never cleaned</b>: a held lease, however long it is held and however rarely
     * it is renewed (its {@code idleSince} is in the future until it expires); any document with
     * a checkpoint, even if nobody held it for months (a consumer group whose members are all
     * down must find its position again: a commit clears {@code disposable} for good); and
     * documents written before this index existed (they carry no {@code disposable} flag).
     * Delete those explicitly with {@link #deleteIfIdle} when a group or stream is
     * decommissioned.
     *
     * <p>Epochs stay strictly increasing after a deletion (ADR 0010). Building a store also drops
     * the clean-up index of earlier versions (TTL on {@code touchedAt}), which did not have these
     * guarantees. The embedded test server ignores TTL indexes; a real server's TTL monitor runs
     * every 60 s.
     *
     * @param idle at least one hour: the deletion counts from the expiry on the primary's clock,
     *     and an hour is far above the clock difference between replica-set members after a
     *     failover and the TTL monitor's one-minute period, so a holder that renews late or a
     *     new primary with a slightly different clock never loses a record it still uses
     */
    public Builder expireUnusedAfter(Duration idle) {
      ConfigurationException.requireNonNull(idle, "expireUnusedAfter");
      ConfigurationException.require(
          idle.compareTo(MIN_IDLE) >= 0,
          "expireUnusedAfter",
          idle,
          "must be at least " + MIN_IDLE.toHours() + " hour (clock differences between replica-set"
              + " members and the TTL monitor's period must never make a live record look idle)");
      this.expireUnusedAfter = idle;
      return this;
    }

    /**
     * The longest any one call of the store may take, server selection, majority write concern and
     * retries included (the driver's client-side operation timeout); default 10 s. A call that
     * does not finish in time fails as unavailable, so a store that stops answering, or a
     * replica set without a reachable majority, never blocks a renewal, a worker or
     * {@code close()} forever.
     *
     * <p>Calls made for a held lease (renew, commit, release) are bounded by a third of that
     * lease's duration (but at least one second) when that is shorter: a renewal stuck on a connection nobody answers then
     * fails in time for the next one to try on a fresh connection before the holder's local
     * deadline (docs/adr/0101-lease-store-calls-bounded-by-the-lease.md).
     *
     * <p>The one-time set-up of {@link #build()} is not such a call: it waits at least
     * {@link #DEFAULT_OPERATION_TIMEOUT} (see there).
     */
    public Builder operationTimeout(Duration timeout) {
      ConfigurationException.requireNonNull(timeout, "operationTimeout");
      ConfigurationException.require(!timeout.isNegative() && timeout.toMillis() >= 1, "operationTimeout", timeout,
          "must be at least 1 ms");
      this.operationTimeout = timeout;
      return this;
    }

    /**
     * Builds the store, creates the TTL index if clean-up was asked for, drops an earlier
     * version's unsafe one and probes whether the server updates by pipeline (ADR 0011).
     *
     * <p>This set-up talks to the server once, when the store is built, usually on a client the
     * application has just created and that has not found its server yet (the driver's first
     * call waits for its discovery: connecting, the handshake, TLS and authentication). It is
     * bounded by {@link Builder#operationTimeout} or {@link #DEFAULT_OPERATION_TIMEOUT}, whichever
     * is longer: a short operation timeout is meant to free the threads that renew held leases, and
     * the set-up holds none; bounded by it, building a store with a timeout of 500 ms failed on a
     * healthy server whenever discovery took longer (seen on a loaded machine, ADR 0010's
     * amendment of 2026-11-27 on the set-up).
     *
     * @throws dev.sluice.lease.LeaseStoreException if the indexes cannot be listed or changed, or
     *     the probe fails for another reason than a server without updates by pipeline
     */
    public MongoLeaseStore build() {
      Duration setupTimeout = operationTimeout.compareTo(DEFAULT_OPERATION_TIMEOUT) >= 0
          ? operationTimeout : DEFAULT_OPERATION_TIMEOUT;
      return new MongoLeaseStoreImpl(database.withTimeout(operationTimeout.toMillis(), TimeUnit.MILLISECONDS),
          collection, writeConcern, expireUnusedAfter, operationTimeout, setupTimeout);
    }
  }
}
