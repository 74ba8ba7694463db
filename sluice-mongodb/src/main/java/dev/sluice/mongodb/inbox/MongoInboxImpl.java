package dev.sluice.mongodb.inbox;

import com.mongodb.MongoException;
import com.mongodb.MongoWriteException;
import dev.sluice.SluiceException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Updates;
import dev.sluice.mongodb.internal.MongoErrors;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

final class MongoInboxImpl implements MongoInbox {
  private static final Logger LOG = LoggerFactory.getLogger(MongoInbox.class);
  private static final String CLAIMED = "claimed";
  private static final String DONE = "done";

  private final MongoCollection<BsonDocument> ids;
  private final Duration claimTimeout;
  private final Clock clock;
  private final String instance;

  MongoInboxImpl(
      MongoCollection<BsonDocument> ids, Duration claimTimeout, Duration retention, Clock clock, String instance) {
    this.ids = ids;
    this.claimTimeout = claimTimeout;
    this.clock = clock;
    this.instance = instance;
    // A TTL index on a field only "done" entries have: claims never expire by TTL.
    IndexOptions options = new IndexOptions().name("processedAt");
    if (retention != null) {
      options.expireAfter(retention.toSeconds(), TimeUnit.SECONDS);
    }
    ids.createIndex(Indexes.ascending("processedAt"), options);
  }

  @Override
  public boolean processIfNew(String messageId, Work work) {
    if (messageId == null || messageId.isBlank()) {
      throw new IllegalArgumentException("messageId must not be blank, but was '" + messageId + "'");
    }
    if (!claim(messageId)) {
      return false;
    }
    try {
      work.run();
    } catch (Exception e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      ids.deleteOne(Filters.and(Filters.eq("_id", messageId), Filters.eq("owner", instance), Filters.eq("state", CLAIMED)));
      throw new InboxWorkException(messageId, e);
    }
    long updated = markDone(messageId);
    if (updated == 0) {
      LOG.warn("Inbox claim on {} expired while processing (longer than claimTimeout {}); "
          + "another consumer may process it again", messageId, claimTimeout);
    }
    return true;
  }

  /**
   * Records {@code messageId} done; returns how many claims of this instance matched. The work has
   * run, so a failure here is tried again while the claim still protects the message (half of
   * {@code claimTimeout}, at most a minute: a failover passes in that time); giving up sooner would
   * let the redelivery run the work a second time once the claim expires.
   */
  private long markDone(String messageId) {
    long deadline = System.nanoTime() + Math.min(claimTimeout.toNanos() / 2, TimeUnit.MINUTES.toNanos(1));
    long backoffMillis = 50;
    while (true) {
      try {
        return ids.updateOne(
                Filters.and(Filters.eq("_id", messageId), Filters.eq("owner", instance), Filters.eq("state", CLAIMED)),
                Updates.combine(
                    Updates.set("state", DONE),
                    Updates.set("processedAt", new Date(clock.millis())),
                    Updates.unset("claimedUntil")))
            .getMatchedCount();
      } catch (com.mongodb.MongoWriteConcernException e) {
        // Recorded on the primary, not yet confirmed by a majority: done, as far as can be known.
        LOG.warn("Inbox record of {} as done is not confirmed by a majority ({})", messageId, e.getMessage());
        return 1;
      } catch (MongoException e) {
        if (System.nanoTime() - deadline >= 0) {
          throw new SluiceException("Inbox: message " + messageId + " was processed, but recording it as done"
              + " failed until now: " + MongoErrors.describe(e) + ". Do not acknowledge it: its claim runs out after"
              + " claimTimeout (" + claimTimeout + "), and its redelivery after that processes it again.", e);
        }
        LOG.warn("Inbox: recording {} as done failed, trying again in {} ms: {}", messageId, backoffMillis,
            e.toString());
        try {
          Thread.sleep(backoffMillis); // back-off between attempts of a write, not synchronisation
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw new SluiceException("Inbox: interrupted while recording message " + messageId + " as done", e);
        }
        backoffMillis = Math.min(backoffMillis * 2, 2_000);
      }
    }
  }

  /** True if this instance now holds the claim; false if the id is done. */
  private boolean claim(String messageId) {
    for (int attempt = 0; attempt < 10; attempt++) {
      Instant now = clock.instant();
      BsonDocument claim =
          new BsonDocument("_id", new BsonString(messageId))
              .append("state", new BsonString(CLAIMED))
              .append("owner", new BsonString(instance))
              .append("claimedUntil", new BsonDateTime(now.plus(claimTimeout).toEpochMilli()));
      try {
        ids.insertOne(claim);
        return true;
      } catch (com.mongodb.MongoWriteConcernException e) {
        // The primary stored the claim; a majority did not confirm it in time. Going on is right:
        // a redelivery would otherwise find this very claim and wait out claimTimeout. Should a
        // failover roll the claim back, another consumer may process the message too, which is
        // the at-least-once contract of a crash.
        LOG.warn("Inbox claim on {} stored but not confirmed by a majority ({}); processing it", messageId,
            e.getMessage());
        return true;
      } catch (MongoWriteException e) {
        if (!MongoErrors.isDuplicateKey(e)) {
          throw e;
        }
      }
      BsonDocument existing = ids.find(Filters.eq("_id", messageId)).first();
      if (existing == null) {
        continue; // the other claim was released in between: try again
      }
      if (DONE.equals(existing.getString("state").getValue())) {
        return false;
      }
      Instant until = Instant.ofEpochMilli(existing.getDateTime("claimedUntil").getValue());
      String owner = existing.getString("owner").getValue();
      if (until.isAfter(now)) {
        throw new ClaimedElsewhereException(messageId, owner, until);
      }
      // An expired claim: its consumer died mid-work. Take it over, compare-and-swap style.
      long taken =
          ids.updateOne(
                  Filters.and(
                      Filters.eq("_id", messageId),
                      Filters.eq("state", CLAIMED),
                      Filters.eq("owner", owner),
                      Filters.eq("claimedUntil", existing.get("claimedUntil"))),
                  Updates.combine(
                      Updates.set("owner", instance),
                      Updates.set("claimedUntil", new Date(now.plus(claimTimeout).toEpochMilli()))))
              .getModifiedCount();
      if (taken == 1) {
        return true;
      }
    }
    throw new IllegalStateException("Could not claim message " + messageId + " after 10 attempts");
  }

  @Override
  public boolean processed(String messageId) {
    return ids.countDocuments(Filters.and(Filters.eq("_id", messageId), Filters.eq("state", DONE))) > 0;
  }

  @Override
  public long purgeProcessedBefore(Instant cutoff) {
    return ids.deleteMany(
            Filters.and(Filters.eq("state", DONE), Filters.lt("processedAt", new Date(cutoff.toEpochMilli()))))
        .getDeletedCount();
  }
}
