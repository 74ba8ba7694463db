package dev.sluice.mongodb.lease;

import static com.mongodb.client.model.Filters.and;
import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.lte;
import static com.mongodb.client.model.Filters.or;
import static com.mongodb.client.model.Filters.regex;

import com.mongodb.MongoException;
import com.mongodb.WriteConcern;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.ReturnDocument;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.Updates;
import com.mongodb.client.result.UpdateResult;
import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.mongodb.internal.MongoErrors;
import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.internal.MongoServerTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.bson.BsonBoolean;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.bson.conversions.Bson;

final class DefaultMongoLeaseStore implements MongoLeaseStore {

  static final String OWNER = "owner";
  static final String EPOCH = "epoch";
  static final String EXPIRES_AT = "expiresAt";
  static final String CHECKPOINT = "checkpoint";
  static final String TOUCHED_AT = "touchedAt";
  /**
   * True while the record never held a checkpoint: only such records (locks, memberships,
   * partitions never committed) may be removed by the optional TTL clean-up. A commit sets it
   * false for good, in the same single-document write as the checkpoint.
   */
  static final String DISPOSABLE = "disposable";
  /**
   * When the record stops being held: its expiry while someone holds it (refreshed by every
   * acquisition and renewal), the release time once released. The TTL index counts from here,
   * so it can only delete a record nobody has held for the whole idle period.
   */
  static final String IDLE_SINCE = "idleSince";
  /** Name of the clean-up TTL index. */
  static final String TTL_INDEX = "sluice_idle_disposable_ttl";
  /** How far ahead of the server clock an epoch may be before a deletion waits for the clock. */
  private static final long MAX_CLOCK_WAIT_MICROS = 50_000;

  private final MongoDatabase database;
  private final MongoCollection<BsonDocument> leases;

  DefaultMongoLeaseStore(
      MongoDatabase database, String collection, WriteConcern writeConcern, Duration idle) {
    this.database = database;
    this.leases = MongoReads.ownRecords(database.getCollection(collection, BsonDocument.class), writeConcern);
    try {
      dropUnsafeLegacyTtlIndex();
      if (idle != null) {
        // Only disposable records (never a checkpoint) and only counted from when they were
        // last held: a held lease or any record with a checkpoint can never be removed.
        leases.createIndex(
            Indexes.ascending(IDLE_SINCE),
            new IndexOptions()
                .name(TTL_INDEX)
                .expireAfter(idle.toSeconds(), TimeUnit.SECONDS)
                .partialFilterExpression(eq(DISPOSABLE, true)));
      }
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(
          "set up the indexes of collection '" + collection + "'", null, e);
    }
  }

  /**
   * Earlier versions' clean-up was a TTL index on {@code touchedAt}, which could delete a lease
   * held longer than the idle period without a renewal and any record's checkpoint. It is ours
   * and unsafe: drop it.
   */
  private void dropUnsafeLegacyTtlIndex() {
    for (BsonDocument index : leases.listIndexes(BsonDocument.class)) {
      BsonValue key = index.get("key");
      if (index.containsKey("expireAfterSeconds") && key != null && key.isDocument()
          && key.asDocument().containsKey(TOUCHED_AT)) {
        leases.dropIndex(index.getString("name").getValue());
      }
    }
  }

  @Override
  public String collectionName() {
    return leases.getNamespace().getCollectionName();
  }

  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    requireName(name);
    requireOwner(owner);
    requireDuration(duration);
    Instant now = now("acquire", name);
    Instant expiresAt = now.plus(duration);
    // Free (released: owner null), expired on the server's clock, or held by this very owner
    // (a restarted holder re-acquires at once; the new epoch fences its previous incarnation).
    // A stale `now` only makes the filter more conservative: it can judge a lease live a moment
    // too long, never expired too early.
    Bson takeable =
        and(
            eq("_id", name),
            or(
                eq(OWNER, null),
                eq(OWNER, owner),
                lte(EXPIRES_AT, new Date(now.toEpochMilli()))));
    Bson update =
        Updates.combine(
            Updates.set(OWNER, owner),
            Updates.set(EXPIRES_AT, new Date(expiresAt.toEpochMilli())),
            Updates.set(TOUCHED_AT, new Date(now.toEpochMilli())),
            Updates.set(IDLE_SINCE, new Date(expiresAt.toEpochMilli())),
            Updates.inc(EPOCH, 1L));
    try {
      BsonDocument taken =
          leases.findOneAndUpdate(
              takeable, update, new FindOneAndUpdateOptions().returnDocument(ReturnDocument.AFTER));
      if (taken != null) {
        return Optional.of(toLease(taken));
      }
      // No takeable document: it is held, or it does not exist yet. Creating it is the seed's
      // upsert race: the unique _id lets exactly one creator win. The first epoch is the
      // server time in microseconds so that a document re-created after a clean-up deletion
      // continues above every epoch the deleted one granted (ADR 0010).
      BsonDocument created =
          new BsonDocument("_id", new BsonString(name))
              .append(OWNER, new BsonString(owner))
              .append(EPOCH, new BsonInt64(Math.multiplyExact(now.toEpochMilli(), 1000L)))
              .append(EXPIRES_AT, new BsonDateTime(expiresAt.toEpochMilli()))
              .append(TOUCHED_AT, new BsonDateTime(now.toEpochMilli()))
              .append(DISPOSABLE, BsonBoolean.TRUE)
              .append(IDLE_SINCE, new BsonDateTime(expiresAt.toEpochMilli()));
      leases.insertOne(created);
      return Optional.of(toLease(created));
    } catch (MongoException e) {
      if (MongoErrors.isDuplicateKey(e)) {
        return Optional.empty();
      }
      throw MongoLeaseFailures.failure("acquire", name, e);
    }
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    Objects.requireNonNull(lease, "lease");
    requireDuration(duration);
    Instant now = now("renew", lease.name());
    Instant expiresAt = now.plus(duration);
    UpdateResult result =
        update(
            lease,
            "renew",
            Updates.combine(
                Updates.set(EXPIRES_AT, new Date(expiresAt.toEpochMilli())),
                Updates.set(TOUCHED_AT, new Date(now.toEpochMilli())),
                Updates.set(IDLE_SINCE, new Date(expiresAt.toEpochMilli()))));
    if (result.getMatchedCount() == 0) {
      throw lost(lease, "renewal matched no document with this owner and epoch");
    }
    return lease.withExpiresAt(expiresAt);
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(checkpoint, "checkpoint");
    // A record with a checkpoint is never disposable again: losing it would lose the position.
    UpdateResult result = update(lease, "commit", Updates.combine(
        Updates.set(CHECKPOINT, toBson(checkpoint)), Updates.set(DISPOSABLE, false)));
    if (result.getMatchedCount() == 0) {
      throw lost(lease, "checkpoint commit of " + checkpoint + " matched no document with this "
          + "owner and epoch; the checkpoint was not moved");
    }
    return lease.withCheckpoint(checkpoint);
  }

  @Override
  public boolean release(Lease lease) {
    Objects.requireNonNull(lease, "lease");
    // Keeps epoch and checkpoint: the next holder continues from both.
    UpdateResult result =
        update(
            lease,
            "release",
            Updates.combine(
                Updates.set(OWNER, BsonNull.VALUE),
                Updates.unset(EXPIRES_AT),
                Updates.currentDate(IDLE_SINCE)));
    return result.getMatchedCount() > 0;
  }

  @Override
  public boolean delete(Lease lease) {
    Objects.requireNonNull(lease, "lease");
    return deleteWhen(
        "delete",
        lease.name(),
        lease.epoch(),
        now -> and(eq("_id", lease.name()), eq(OWNER, lease.owner()), eq(EPOCH, lease.epoch())));
  }

  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    requireName(name);
    return deleteWhen(
        "deleteIfIdle",
        name,
        epoch,
        now ->
            and(
                eq("_id", name),
                eq(EPOCH, epoch),
                or(eq(OWNER, null), lte(EXPIRES_AT, new Date(now.toEpochMilli())))));
  }

  /**
   * One conditional {@code deleteOne}. A re-created document starts at the server clock in
   * microseconds (millisecond precision × 1000), so a document is only deleted once that clock
   * is past its epoch: a document created, deleted and re-created within one millisecond would
   * otherwise repeat an epoch. Such a young document waits for the server clock to move on (at
   * most {@value #MAX_CLOCK_WAIT_MICROS} µs of server clock, and one second of asking); further
   * ahead, only a clock that stepped back can explain it, and the document is kept (false).
   */
  private boolean deleteWhen(
      String action, String name, long epoch, Function<Instant, Bson> filter) {
    Instant now = now(action, name);
    // The process clock only bounds how long we keep asking; it judges nothing.
    long giveUpAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    while (Math.multiplyExact(now.toEpochMilli(), 1000L) <= epoch) {
      if (epoch - Math.multiplyExact(now.toEpochMilli(), 1000L) > MAX_CLOCK_WAIT_MICROS
          || System.nanoTime() - giveUpAt > 0) {
        return false;
      }
      now = now(action, name);
    }
    try {
      return leases.deleteOne(filter.apply(now)).getDeletedCount() == 1;
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, name, e);
    }
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    Instant now = now("read", name);
    try {
      BsonDocument doc = leases.find(eq("_id", name)).first();
      return Optional.ofNullable(doc).map(d -> toRecord(d, now));
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("read", name, e);
    }
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    Objects.requireNonNull(prefix, "prefix");
    Instant now = now("list", prefix + "*");
    List<LeaseRecord> records = new ArrayList<>();
    try {
      Bson filter = prefix.isEmpty() ? new BsonDocument() : regex("_id", "^" + Pattern.quote(prefix));
      for (BsonDocument d : leases.find(filter).sort(Sorts.ascending("_id"))) {
        records.add(toRecord(d, now));
      }
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("list", prefix + "*", e);
    }
    return records;
  }

  @Override
  public Instant now() {
    return now("read the server clock", null);
  }

  /** The server's clock; a failure names what it was read for. */
  private Instant now(String action, String name) {
    try {
      return MongoServerTime.now(database);
    } catch (SluiceException e) {
      if (e.getCause() instanceof MongoException cause) {
        throw MongoLeaseFailures.failure(action, name, cause);
      }
      // The server answered without a clock: not something a retry changes.
      throw new LeaseStoreException(e.getMessage(), false, e);
    }
  }

  private UpdateResult update(Lease lease, String action, Bson update) {
    Bson held = and(eq("_id", lease.name()), eq(OWNER, lease.owner()), eq(EPOCH, lease.epoch()));
    try {
      return leases.updateOne(held, update);
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, lease.name(), e);
    }
  }


  private static LeaseLostException lost(Lease lease, String detail) {
    return new LeaseLostException(lease.name(), lease.epoch(), detail + " (owner " + lease.owner()
        + ")");
  }

  private static Lease toLease(BsonDocument d) {
    return new Lease(
        d.getString("_id").getValue(),
        d.getString(OWNER).getValue(),
        d.getNumber(EPOCH).longValue(),
        Instant.ofEpochMilli(d.getDateTime(EXPIRES_AT).getValue()),
        checkpointOf(d));
  }

  private static LeaseRecord toRecord(BsonDocument d, Instant now) {
    BsonValue owner = d.get(OWNER);
    BsonValue expires = d.get(EXPIRES_AT);
    BsonValue epoch = d.get(EPOCH);
    return new LeaseRecord(
        d.getString("_id").getValue(),
        owner != null && owner.isString() ? owner.asString().getValue() : null,
        epoch != null && epoch.isNumber() ? epoch.asNumber().longValue() : 0L,
        expires != null && expires.isDateTime()
            ? Instant.ofEpochMilli(expires.asDateTime().getValue())
            : null,
        checkpointOf(d),
        now);
  }

  static BsonDocument toBson(Position p) {
    return new BsonDocument("token", new BsonString(p.token()))
        .append("time", p.time() == null ? BsonNull.VALUE : new BsonDateTime(p.time().toEpochMilli()));
  }

  private static Position checkpointOf(BsonDocument d) {
    BsonValue cp = d.get(CHECKPOINT);
    if (cp == null || !cp.isDocument()) {
      return null;
    }
    BsonDocument c = cp.asDocument();
    BsonValue time = c.get("time");
    return new Position(
        c.getString("token").getValue(),
        time != null && time.isDateTime() ? Instant.ofEpochMilli(time.asDateTime().getValue()) : null);
  }

  private static void requireName(String name) {
    ConfigurationException.require(
        name != null && !name.isEmpty(), "name", name, "must be a non-empty lease name");
  }

  private static void requireOwner(String owner) {
    ConfigurationException.require(
        owner != null && !owner.isEmpty(), "owner", owner, "must be a non-empty owner id");
  }

  private static void requireDuration(Duration d) {
    ConfigurationException.require(
        d != null && !d.isNegative() && !d.isZero() && d.toMillis() > 0,
        "duration",
        d,
        "must be at least one millisecond");
  }
}
