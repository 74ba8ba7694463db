package dev.sluice.mongodb.inbox;

import dev.sluice.mongodb.internal.MongoReads;
import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;

/**
 * The consumer side of at-least-once delivery: remembers which message ids a consumer group
 * processed, so a redelivered message (same {@code sluice-id}) is skipped. One collection per
 * consumer group; the document id is the message id (a unique key).
 *
 * <p>{@link #processIfNew} is "insert first": it claims the id with an insert, which the unique
 * {@code _id} lets exactly one concurrent consumer win, runs the work, then marks the id done. If
 * the work throws, the claim is deleted so a redelivery processes it again. If the process dies
 * in between, the claim expires after {@code claimTimeout} and another consumer may take it:
 * nothing is lost, and the work runs twice only in that crash case. Claims are judged on this
 * process's {@link Clock}: keep {@code claimTimeout} well above the clock skew between consumers
 * and above the longest work.
 *
 * <p>When the consumer's own write goes to the same MongoDB replica set, the strongest form is to
 * put that write and the inbox insert in one transaction; MongoDB needs a replica set for that,
 * so this helper does not assume it.
 *
 * <pre>{@code
 * MongoInbox inbox = MongoInbox.create(db, "inbox_billing");
 * boolean ran = inbox.processIfNew(envelope.id(), () -> billing.charge(envelope.event()));
 * }</pre>
 */
public interface MongoInbox {

  /** The work to run at most once per message id (barring a crash mid-work). */
  @FunctionalInterface
  interface Work {
    void run() throws Exception;
  }

  /**
   * Runs {@code work} if {@code messageId} was not processed yet.
   *
   * @return true if the work ran now, false if the id was processed before (a duplicate)
   * @throws ClaimedElsewhereException if another consumer is processing the same id right now:
   *     do not acknowledge the message; it will be redelivered
   * @throws InboxWorkException wrapping what {@code work} threw (the claim is released)
   */
  boolean processIfNew(String messageId, Work work);

  /** Whether {@code messageId} was processed (and not purged). */
  boolean processed(String messageId);

  /** Deletes the record of ids processed before {@code cutoff}; returns how many. */
  long purgeProcessedBefore(Instant cutoff);

  static MongoInbox create(MongoDatabase database, String collection) {
    return builder(database, collection).build();
  }

  static Builder builder(MongoDatabase database, String collection) {
    return new Builder(database, collection);
  }

  /** Builder; every setter validates. */
  final class Builder {
    private final MongoDatabase database;
    private final String collection;
    private Duration claimTimeout = Duration.ofMinutes(5);
    private Duration retention;
    private Clock clock = Clock.systemUTC();
    private String instance = UUID.randomUUID().toString();

    private Builder(MongoDatabase database, String collection) {
      this.database = ConfigurationException.requireNonNull(database, "database");
      this.collection = ConfigurationException.requireNonNull(collection, "collection");
      ConfigurationException.require(!collection.isBlank(), "collection", "'" + collection + "'", "must not be blank");
    }

    /** How long a claim protects work in progress; default 5 minutes. */
    public Builder claimTimeout(Duration claimTimeout) {
      ConfigurationException.requireNonNull(claimTimeout, "claimTimeout");
      ConfigurationException.require(
          !claimTimeout.isNegative() && !claimTimeout.isZero(), "claimTimeout", claimTimeout, "must be positive");
      this.claimTimeout = claimTimeout;
      return this;
    }

    /**
     * Creates a TTL index so MongoDB deletes processed ids after {@code retention}. Keep it
     * longer than the longest redelivery window (broker retention, replay ranges).
     */
    public Builder retention(Duration retention) {
      ConfigurationException.requireNonNull(retention, "retention");
      ConfigurationException.require(
          retention.toSeconds() >= 1, "retention", retention, "must be at least 1 second");
      this.retention = retention;
      return this;
    }

    public Builder clock(Clock clock) {
      this.clock = ConfigurationException.requireNonNull(clock, "clock");
      return this;
    }

    /** This consumer instance's id (default random): recorded in claims. */
    public Builder instance(String instance) {
      this.instance = ConfigurationException.requireNonNull(instance, "instance");
      return this;
    }

    public MongoInbox build() {
      return new MongoInboxImpl(MongoReads.ownRecords(database.getCollection(collection, org.bson.BsonDocument.class)),
          claimTimeout, retention, clock, instance);
    }
  }
}
