package dev.sluice.mongodb.lease;

import static com.mongodb.client.model.Filters.and;
import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.exists;
import static com.mongodb.client.model.Filters.expr;
import static com.mongodb.client.model.Filters.lte;
import static com.mongodb.client.model.Filters.or;
import static com.mongodb.client.model.Filters.regex;

import com.mongodb.MongoException;
import com.mongodb.MongoServerException;
import com.mongodb.WriteConcern;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Projections;
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
import org.bson.BsonArray;
import org.bson.BsonBoolean;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
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

  /** A document id no lease can have (names are validated non-empty strings; this is not one). */
  private static final BsonDocument PROBE_ID = new BsonDocument("sluice", new BsonString("capability probe"));
  /** Errors a server without pipeline updates (before 4.2) answers the probe with. */
  private static final List<Integer> NO_PIPELINE_UPDATES = List.of(2, 9, 14);
  private static final BsonString NOW = new BsonString("$$NOW");
  /** Field with the server's {@code $$NOW} that reads add to each record. */
  private static final String READ_AT = "sluiceReadAt";

  private final MongoDatabase database;
  private final MongoCollection<BsonDocument> leases;
  /**
   * Whether every decision compares with {@code $$NOW} inside the statement that acts on it (the
   * clock of the server that holds the document, ADR 0011); false only on servers without
   * pipeline updates, where the time is read with {@code hello} first.
   */
  private final boolean clockInStatement;

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
    this.clockInStatement = pipelineUpdates();
  }

  /**
   * The capability probe: an update by pipeline that matches nothing. Servers since 4.2 accept
   * it (and write nothing); earlier ones refuse the pipeline with a parse or type error, and then
   * the store reads the clock with {@code hello} before each decision instead.
   */
  private boolean pipelineUpdates() {
    try {
      leases.updateOne(eq("_id", PROBE_ID), List.of(new BsonDocument("$set", new BsonDocument("probedAt", NOW))));
      return true;
    } catch (MongoServerException e) {
      if (NO_PIPELINE_UPDATES.contains(e.getCode())) {
        return false;
      }
      throw MongoLeaseFailures.failure("probe whether the server updates by pipeline", null, e);
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("probe whether the server updates by pipeline", null, e);
    }
  }

  /** Whether expiry is judged by {@code $$NOW} inside each statement (false: by {@code hello} first). */
  boolean judgesExpiryInStatement() {
    return clockInStatement;
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
    // Free (released: owner null), expired, or held by this very owner (a restarted holder
    // re-acquires at once; the new epoch fences its previous incarnation).
    Instant now = clockInStatement ? null : now("acquire", name);
    Bson takeable = and(eq("_id", name), or(eq(OWNER, null), eq(OWNER, owner), expired(now)));
    FindOneAndUpdateOptions after = new FindOneAndUpdateOptions().returnDocument(ReturnDocument.AFTER);
    try {
      BsonDocument taken =
          clockInStatement
              ? leases.findOneAndUpdate(takeable,
                  List.of(set(heldFromNow(owner, duration).append(EPOCH, add(new BsonString("$" + EPOCH), new BsonInt64(1))))),
                  after)
              : leases.findOneAndUpdate(takeable,
                  Updates.combine(
                      Updates.set(OWNER, owner),
                      Updates.set(EXPIRES_AT, date(now.plus(duration))),
                      Updates.set(TOUCHED_AT, date(now)),
                      Updates.set(IDLE_SINCE, date(now.plus(duration))),
                      Updates.inc(EPOCH, 1L)),
                  after);
      if (taken != null) {
        return Optional.of(toLease(taken));
      }
      // No takeable document: it is held, or it does not exist yet. Creating it is the seed's
      // upsert race: the unique _id lets exactly one creator win. The first epoch is the
      // server time in microseconds so that a document re-created after a clean-up deletion
      // continues above every epoch the deleted one granted (ADR 0010). Without pipeline
      // updates the clock is read again now: a deletion that made the document absent happened
      // before the takeover above found nothing, so a clock read after it is past that deletion's
      // clock and hence past every deleted epoch (the `now` read first may be older than both).
      return Optional.of(toLease(clockInStatement
          ? createInStatement(name, owner, duration)
          : create(name, owner, duration, now("acquire", name))));
    } catch (MongoException e) {
      if (MongoErrors.isDuplicateKey(e)) {
        return Optional.empty();
      }
      throw MongoLeaseFailures.failure("acquire", name, e);
    }
  }

  /**
   * Creation with the server's clock: an upsert whose filter no lease document matches (each has
   * an owner field, null once released), so it inserts, or fails on the unique {@code _id} when
   * the document exists.
   */
  private BsonDocument createInStatement(String name, String owner, Duration duration) {
    return leases.findOneAndUpdate(
        and(eq("_id", name), exists(OWNER, false)),
        List.of(set(heldFromNow(owner, duration).append(EPOCH, nowMicros()).append(DISPOSABLE, BsonBoolean.TRUE))),
        new FindOneAndUpdateOptions().upsert(true).returnDocument(ReturnDocument.AFTER));
  }

  private BsonDocument create(String name, String owner, Duration duration, Instant now) {
    BsonDocument created =
        new BsonDocument("_id", new BsonString(name))
            .append(OWNER, new BsonString(owner))
            .append(EPOCH, new BsonInt64(Math.multiplyExact(now.toEpochMilli(), 1000L)))
            .append(EXPIRES_AT, date(now.plus(duration)))
            .append(TOUCHED_AT, date(now))
            .append(DISPOSABLE, BsonBoolean.TRUE)
            .append(IDLE_SINCE, date(now.plus(duration)));
    leases.insertOne(created);
    return created;
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    Objects.requireNonNull(lease, "lease");
    requireDuration(duration);
    if (clockInStatement) {
      BsonDocument renewed;
      try {
        renewed = leases.findOneAndUpdate(
            heldBy(lease),
            List.of(set(new BsonDocument(EXPIRES_AT, add(NOW, millis(duration)))
                .append(TOUCHED_AT, NOW)
                .append(IDLE_SINCE, add(NOW, millis(duration))))),
            new FindOneAndUpdateOptions().projection(Projections.include(EXPIRES_AT))
                .returnDocument(ReturnDocument.AFTER));
      } catch (MongoException e) {
        throw MongoLeaseFailures.failure("renew", lease.name(), e);
      }
      if (renewed == null) {
        throw lost(lease, "renewal matched no document with this owner and epoch");
      }
      return lease.withExpiresAt(Instant.ofEpochMilli(renewed.getDateTime(EXPIRES_AT).getValue()));
    }
    Instant now = now("renew", lease.name());
    Instant expiresAt = now.plus(duration);
    UpdateResult result =
        update(
            lease,
            "renew",
            Updates.combine(
                Updates.set(EXPIRES_AT, date(expiresAt)),
                Updates.set(TOUCHED_AT, date(now)),
                Updates.set(IDLE_SINCE, date(expiresAt))));
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
    // Keeps epoch and checkpoint: the next holder continues from both. $currentDate is the clock
    // of the server holding the document.
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
    return deleteWhen("delete", lease.name(), lease.epoch(), now -> heldBy(lease));
  }

  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    requireName(name);
    return deleteWhen(
        "deleteIfIdle",
        name,
        epoch,
        now -> and(eq("_id", name), eq(EPOCH, epoch), or(eq(OWNER, null), expired(now))));
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
    if (clockInStatement) {
      return deleteWhenInStatement(action, name, epoch, filter.apply(null));
    }
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

  /** {@link #deleteWhen} with the clock past the epoch judged inside the deletion itself. */
  private boolean deleteWhenInStatement(String action, String name, long epoch, Bson filter) {
    Bson pastEpoch = expr(new BsonDocument("$gt", new BsonArray(List.of(nowMicros(), new BsonInt64(epoch)))));
    long giveUpAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    try {
      while (leases.deleteOne(and(filter, pastEpoch)).getDeletedCount() == 0) {
        // Not deleted: gone, changed, live, or only too young for the server clock. Only the
        // last is asked again.
        BsonDocument young = leases.aggregate(List.of(
            new BsonDocument("$match", filter.toBsonDocument()),
            new BsonDocument("$project", new BsonDocument("_id", new BsonInt32(0))
                .append("ahead", new BsonDocument("$subtract", new BsonArray(List.of(new BsonInt64(epoch), nowMicros())))))))
            .first();
        if (young == null || young.getNumber("ahead").longValue() > MAX_CLOCK_WAIT_MICROS
            || System.nanoTime() - giveUpAt > 0) {
          return false;
        }
      }
      return true;
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, name, e);
    }
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    try {
      if (clockInStatement) {
        return Optional.ofNullable(readingTheClock(eq("_id", name), false).first()).map(d -> toRecord(d, readAt(d)));
      }
      Instant now = now("read", name);
      BsonDocument doc = leases.find(eq("_id", name)).first();
      return Optional.ofNullable(doc).map(d -> toRecord(d, now));
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("read", name, e);
    }
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    Objects.requireNonNull(prefix, "prefix");
    List<LeaseRecord> records = new ArrayList<>();
    try {
      Bson filter = prefix.isEmpty() ? new BsonDocument() : regex("_id", "^" + Pattern.quote(prefix));
      if (clockInStatement) {
        for (BsonDocument d : readingTheClock(filter, true)) {
          records.add(toRecord(d, readAt(d)));
        }
        return records;
      }
      Instant now = now("list", prefix + "*");
      for (BsonDocument d : leases.find(filter).sort(Sorts.ascending("_id"))) {
        records.add(toRecord(d, now));
      }
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("list", prefix + "*", e);
    }
    return records;
  }

  /** The documents matching {@code filter}, each with the server's {@code $$NOW} of this read. */
  private com.mongodb.client.AggregateIterable<BsonDocument> readingTheClock(Bson filter, boolean sorted) {
    List<BsonDocument> pipeline = new ArrayList<>();
    pipeline.add(new BsonDocument("$match", filter.toBsonDocument()));
    if (sorted) {
      pipeline.add(new BsonDocument("$sort", new BsonDocument("_id", new BsonInt32(1))));
    }
    pipeline.add(new BsonDocument("$addFields", new BsonDocument(READ_AT, NOW)));
    return leases.aggregate(pipeline);
  }

  private static Instant readAt(BsonDocument d) {
    return Instant.ofEpochMilli(d.getDateTime(READ_AT).getValue());
  }

  @Override
  public Instant now() {
    return now("read the server clock", null);
  }

  /** A change stream on the lease collection, on a daemon thread ({@link ReleaseWatch}). */
  @Override
  public AutoCloseable watchReleases(String prefix, java.util.function.Consumer<String> released) {
    Objects.requireNonNull(prefix, "prefix");
    Objects.requireNonNull(released, "released");
    return new ReleaseWatch(leases, prefix, released).start();
  }

  /**
   * The clock expiry is judged by. With pipeline updates it is {@code $$NOW} where the lease
   * documents are, read from any of them; while there is none (nothing to judge yet) and on
   * servers without pipeline updates, {@code hello}'s {@code localTime}. A failure names what it
   * was read for.
   */
  private Instant now(String action, String name) {
    if (clockInStatement) {
      try {
        BsonDocument d = leases.aggregate(List.of(
            new BsonDocument("$limit", new BsonInt32(1)),
            new BsonDocument("$project", new BsonDocument("_id", new BsonInt32(0)).append(READ_AT, NOW)))).first();
        if (d != null) {
          return readAt(d);
        }
      } catch (MongoException e) {
        throw MongoLeaseFailures.failure(action, name, e);
      }
    }
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
    try {
      return leases.updateOne(heldBy(lease), update);
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, lease.name(), e);
    }
  }

  private static Bson heldBy(Lease lease) {
    return and(eq("_id", lease.name()), eq(OWNER, lease.owner()), eq(EPOCH, lease.epoch()));
  }

  /** Expired on the server's clock: {@code $$NOW} in the statement, or {@code now} read before. */
  private Bson expired(Instant now) {
    return now == null
        ? expr(new BsonDocument("$lte", new BsonArray(List.of(new BsonString("$" + EXPIRES_AT), NOW))))
        : lte(EXPIRES_AT, new Date(now.toEpochMilli()));
  }

  /** Owner and times of a lease taken at the server's {@code $$NOW}, as pipeline expressions. */
  private static BsonDocument heldFromNow(String owner, Duration duration) {
    return new BsonDocument(OWNER, new BsonDocument("$literal", new BsonString(owner)))
        .append(EXPIRES_AT, add(NOW, millis(duration)))
        .append(TOUCHED_AT, NOW)
        .append(IDLE_SINCE, add(NOW, millis(duration)));
  }

  private static BsonDocument set(BsonDocument fields) {
    return new BsonDocument("$set", fields);
  }

  private static BsonDocument add(BsonValue a, BsonValue b) {
    return new BsonDocument("$add", new BsonArray(List.of(a, b)));
  }

  /** The server clock in microseconds (millisecond precision), the unit of a first epoch. */
  private static BsonDocument nowMicros() {
    return new BsonDocument("$multiply", new BsonArray(List.of(new BsonDocument("$toLong", NOW), new BsonInt64(1000))));
  }

  private static BsonInt64 millis(Duration d) {
    return new BsonInt64(d.toMillis());
  }

  private static BsonDateTime date(Instant t) {
    return new BsonDateTime(t.toEpochMilli());
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
