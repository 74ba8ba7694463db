package dev.sluice.mongodb.inbox;

import com.mongodb.MongoWriteException;
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
    long updated =
        ids.updateOne(
                Filters.and(Filters.eq("_id", messageId), Filters.eq("owner", instance), Filters.eq("state", CLAIMED)),
                Updates.combine(
                    Updates.set("state", DONE),
                    Updates.set("processedAt", new Date(clock.millis())),
                    Updates.unset("claimedUntil")))
            .getMatchedCount();
    if (updated == 0) {
      LOG.warn("Inbox claim on {} expired while processing (longer than claimTimeout {}); "
          + "another consumer may process it again", messageId, claimTimeout);
    }
    return true;
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
