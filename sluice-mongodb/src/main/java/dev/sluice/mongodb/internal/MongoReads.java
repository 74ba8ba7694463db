package dev.sluice.mongodb.internal;

import com.mongodb.ReadConcern;
import com.mongodb.ReadPreference;
import com.mongodb.WriteConcern;
import com.mongodb.client.MongoCollection;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

/**
 * The read settings of every collection Sluice reads to decide something (docs/adr/0058). The
 * client's defaults are the application's business: a connection string with
 * {@code readPreference=secondaryPreferred} must not send a view recomputation, a parked-key check
 * or an inbox claim to a lagging secondary, where it would decide on a state that is already past.
 *
 * <p>Every collection handed out here is also bounded in time: a handle that carries no timeout
 * (no {@code timeoutMS} on the client, database or collection: the driver's default, with no
 * socket read timeout either) gets {@link #DEFAULT_TIMEOUT}, so no store call waits forever for a
 * primary that stopped answering or a majority that cannot be reached. A timeout the application
 * set is kept.
 */
public final class MongoReads {
  /** The bound of each call on a collection whose handle carries no timeout of its own. */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(10);

  private MongoReads() {}

  /** {@code collection}, with {@link #DEFAULT_TIMEOUT} unless its handle already has a timeout. */
  public static <T> MongoCollection<T> bounded(MongoCollection<T> collection) {
    return collection.getTimeout(TimeUnit.MILLISECONDS) == null
        ? collection.withTimeout(DEFAULT_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
        : collection;
  }

  /**
   * Sluice's own records (leases, dead letters, inbox claims, view bookkeeping): read on the
   * primary at majority read concern, written at majority, so a record is acknowledged only once
   * it survives a failover and every read sees every acknowledged record.
   */
  public static <T> MongoCollection<T> ownRecords(MongoCollection<T> collection) {
    return ownRecords(collection, WriteConcern.MAJORITY);
  }

  /**
   * Sluice's own records written at {@code writeConcern} (the lease store's is configurable): on
   * the primary, read at majority when the writes are, else at local, so that a store configured
   * with {@code w:1} still reads its own writes.
   */
  public static <T> MongoCollection<T> ownRecords(MongoCollection<T> collection, WriteConcern writeConcern) {
    return bounded(collection).withReadPreference(ReadPreference.primary())
        .withWriteConcern(writeConcern)
        .withReadConcern("majority".equals(writeConcern.getWObject()) ? ReadConcern.MAJORITY : ReadConcern.LOCAL);
  }

  /**
   * A collection of the application that Sluice reads to decide (a view's sources): on the
   * primary, majority-committed, so nothing is derived from a write that a failover rolls back.
   * The change stream delivers only majority-committed changes, so such a read sees at least the
   * state of the change being processed.
   */
  public static <T> MongoCollection<T> sources(MongoCollection<T> collection) {
    return bounded(collection).withReadPreference(ReadPreference.primary()).withReadConcern(ReadConcern.MAJORITY);
  }

  /**
   * A collection of the application that Sluice writes conditionally and reads back (fenced
   * writes, sequenced values): on the primary, with the application's own read and write
   * concerns, so a read sees the application's and Sluice's own latest writes.
   */
  public static <T> MongoCollection<T> primary(MongoCollection<T> collection) {
    return bounded(collection).withReadPreference(ReadPreference.primary());
  }
}
