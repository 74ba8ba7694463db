package dev.sluice.mongodb.lease;

import static com.mongodb.client.model.Filters.and;
import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.exists;
import static com.mongodb.client.model.Filters.expr;
import static com.mongodb.client.model.Filters.or;
import static com.mongodb.client.model.Filters.regex;

import com.mongodb.MongoException;
import com.mongodb.MongoServerException;
import com.mongodb.WriteConcern;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.ReturnDocument;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.Updates;
import com.mongodb.client.result.UpdateResult;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseCallBounds;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.mongodb.internal.MongoErrors;
import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.internal.MongoServerTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BiPredicate;
import java.util.regex.Pattern;
import org.bson.BsonArray;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonNull;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.bson.conversions.Bson;

final class MongoLeaseStoreImpl implements MongoLeaseStore {

  static final String OWNER = "owner";
  static final String EPOCH = "epoch";
  /**
   * An estimate of the expiry, for operators, the TTL clean-up's {@link #IDLE_SINCE} and earlier
   * versions of Sluice; never what this version decides by (that is {@link #RENEWED_AT} +
   * {@link #DURATION}, ADR 0083). Documents written by earlier versions have only this field.
   */
  static final String EXPIRES_AT = "expiresAt";
  /** When the current grant was made or last renewed: {@code $currentDate}, the shard's clock. */
  static final String RENEWED_AT = "renewedAt";
  /** The epoch whose grant or renewal set {@link #RENEWED_AT}: the two judge expiry only together. */
  static final String RENEWED_EPOCH = "renewedEpoch";
  /** The length of the current grant in milliseconds. */
  static final String DURATION = "duration";
  /** The last stamp of the shard's clock ({@code $currentDate}) that a decision was judged by. */
  static final String ASKED_AT = "askedAt";
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
  /** The document whose stamp reads the shard's clock when no recent stamp is known. */
  private static final BsonDocument CLOCK_ID = new BsonDocument("sluice", new BsonString("clock"));
  /** How long a stamp of the shard's clock may be carried forward on this process's monotonic clock. */
  private static final long MAX_ESTIMATE_AGE_NANOS = TimeUnit.SECONDS.toNanos(10);

  private final MongoDatabase database;
  private final MongoCollection<BsonDocument> leases;
  /** The bounds of its calls (ADR 0101); {@code leases} itself carries the operation timeout. */
  private final LeaseCallBounds bounds;
  /** The last stamp of the shard's clock this store received, and when (monotonic): {@link #storeNow}. */
  private Instant lastStamp;
  private long lastStampNanos;

  MongoLeaseStoreImpl(MongoDatabase database, String collection, WriteConcern writeConcern,
      Duration idle, Duration operationTimeout, Duration setupTimeout) {
    this.database = database;
    this.bounds = new LeaseCallBounds(operationTimeout);
    this.leases = MongoReads.ownRecords(database.getCollection(collection, BsonDocument.class), writeConcern);
    // The set-up is usually the first call of a new client, which waits for the driver to find
    // its server: not bounded by a short operation timeout (MongoLeaseStore.Builder#build).
    MongoCollection<BsonDocument> setup = leases.withTimeout(setupTimeout.toMillis(), TimeUnit.MILLISECONDS);
    try {
      dropUnsafeLegacyTtlIndex(setup);
      if (idle != null) {
        // Only disposable records (never a checkpoint) and only counted from when they were
        // last held: a held lease or any record with a checkpoint can never be removed.
        setup.createIndex(
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
  private static void dropUnsafeLegacyTtlIndex(MongoCollection<BsonDocument> leases) {
    for (BsonDocument index : leases.listIndexes(BsonDocument.class)) {
      BsonValue key = index.get("key");
      if (index.containsKey("expireAfterSeconds") && key != null && key.isDocument()
          && key.asDocument().containsKey(TOUCHED_AT)) {
        leases.dropIndex(index.getString("name").getValue());
      }
    }
  }

  /**
   * The lease collection bounded for a call on behalf of a held lease of {@code duration}
   * ({@link LeaseCallBounds#forLease}; the driver closes a connection whose read timed out).
   */
  private MongoCollection<BsonDocument> forLease(Duration duration) {
    return leases.withTimeout(bounds.forLease(duration), TimeUnit.MILLISECONDS);
  }

  /** As {@link #forLease(Duration)} for held lease {@code name} ({@link LeaseCallBounds#forHeld}). */
  private MongoCollection<BsonDocument> forLease(String name) {
    return leases.withTimeout(bounds.forHeld(name), TimeUnit.MILLISECONDS);
  }

  private Lease granted(Lease lease, Duration duration) {
    bounds.granted(lease.name(), duration);
    return lease;
  }

  @Override
  public String collectionName() {
    return leases.getNamespace().getCollectionName();
  }

  /**
   * Two single-document writes (ADR 0083). The <b>stamp</b> sets {@code askedAt} with
   * {@code $currentDate}, which the shard holding the document evaluates (a mongos passes a
   * classic update on; {@code $$NOW} it would resolve itself), creating a bare record if the name
   * has none, and returns the record: whether the lease is free, released, this owner's, or
   * expired is judged on that one document, expiry against the stamp, both on the shard's clock.
   * The <b>grant</b> then changes the record only if it is still exactly as judged (owner, epoch,
   * renewal and expiry fields unchanged), so a renewal or another grant in between wins.
   */
  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    requireName(name);
    requireOwner(owner);
    requireDuration(duration);
    try {
      Optional<Lease> free = tryAcquireFree(name, owner, duration);
      if (free.isPresent()) {
        return free.map(l -> granted(l, duration));
      }
      BsonDocument seen;
      try {
        seen = leases.findOneAndUpdate(eq("_id", name), Updates.currentDate(ASKED_AT),
            new FindOneAndUpdateOptions().upsert(true).returnDocument(ReturnDocument.AFTER));
      } catch (MongoException e) {
        if (MongoErrors.isDuplicateKey(e)) {
          return Optional.empty(); // another caller created the record at this instant: contention
        }
        throw e;
      }
      Instant askedAt = stamped(seen, ASKED_AT);
      Bson unchanged;
      long epoch;
      boolean creating = !seen.containsKey(EPOCH);
      if (creating) {
        // Never granted (or deleted since): the first epoch is the shard's clock in microseconds,
        // read after the deletion that made room, which waited until that clock had passed every
        // epoch the deleted record granted (deleteWhen).
        epoch = Math.multiplyExact(askedAt.toEpochMilli(), 1000L);
        unchanged = and(eq("_id", name), exists(EPOCH, false));
      } else {
        String holder = ownerOf(seen);
        Instant expiry = expiry(seen);
        boolean takeable = holder == null || holder.equals(owner) || expiry == null || !expiry.isAfter(askedAt);
        if (!takeable) {
          return Optional.empty();
        }
        // Free, released, expired on the shard's clock, or held by this very owner (a restarted
        // holder re-acquires at once; the new epoch fences its previous incarnation).
        epoch = Math.addExact(seen.getNumber(EPOCH).longValue(), 1L);
        unchanged = asSeen(eq("_id", name), seen);
      }
      Instant estimatedExpiry = askedAt.plus(duration);
      List<Bson> grant = new ArrayList<>(List.of(
          Updates.set(OWNER, owner),
          Updates.set(EPOCH, epoch),
          Updates.set(RENEWED_EPOCH, epoch),
          Updates.set(DURATION, duration.toMillis()),
          Updates.currentDate(RENEWED_AT),
          Updates.currentDate(TOUCHED_AT),
          Updates.set(EXPIRES_AT, date(estimatedExpiry)),
          Updates.set(IDLE_SINCE, date(estimatedExpiry))));
      if (creating) {
        grant.add(Updates.set(DISPOSABLE, true));
      }
      BsonDocument taken = leases.findOneAndUpdate(unchanged, Updates.combine(grant),
          new FindOneAndUpdateOptions().returnDocument(ReturnDocument.AFTER));
      if (taken == null) {
        return Optional.empty(); // renewed, released, granted or deleted since the stamp
      }
      stamped(taken, RENEWED_AT);
      return Optional.of(granted(toLease(taken), duration));
    } catch (MongoException e) {
      if (MongoErrors.isDuplicateKey(e)) {
        return Optional.empty();
      }
      throw MongoLeaseFailures.failure("acquire", name, e);
    }
  }

  /**
   * The one-statement path for a record that needs no clock to judge: released, or held by this
   * very owner. Granted with {@code $inc} on both the epoch and {@code renewedEpoch}, which the
   * filter requires equal (a field comparison, no clock), so the new grant's renewal fields stay
   * its own. Needs an estimate of the shard's clock for the informational fields (the first call
   * of a store has none and takes the two-write path). Empty if the record is anything else.
   */
  private Optional<Lease> tryAcquireFree(String name, String owner, Duration duration) {
    Instant estimate = estimatedStoreNow(Long.MAX_VALUE);
    if (estimate == null) {
      return Optional.empty();
    }
    Instant estimatedExpiry = estimate.plus(duration);
    BsonDocument taken = leases.findOneAndUpdate(
        and(eq("_id", name), exists(EPOCH), or(eq(OWNER, null), eq(OWNER, owner)),
            expr(new BsonDocument("$eq", new BsonArray(List.of(new BsonString("$" + RENEWED_EPOCH), new BsonString("$" + EPOCH)))))),
        Updates.combine(
            Updates.set(OWNER, owner),
            Updates.inc(EPOCH, 1L),
            Updates.inc(RENEWED_EPOCH, 1L),
            Updates.set(DURATION, duration.toMillis()),
            Updates.currentDate(RENEWED_AT),
            Updates.currentDate(TOUCHED_AT),
            Updates.set(EXPIRES_AT, date(estimatedExpiry)),
            Updates.set(IDLE_SINCE, date(estimatedExpiry))),
        new FindOneAndUpdateOptions().returnDocument(ReturnDocument.AFTER));
    if (taken == null) {
      return Optional.empty();
    }
    stamped(taken, RENEWED_AT);
    return Optional.of(toLease(taken));
  }

  /**
   * One write: {@code renewedAt} from the shard's clock ({@code $currentDate}), after this call
   * started, so the expiry it sets ({@code renewedAt + duration}) is later in real time than the
   * holder's local deadline (ADR 0002).
   */
  @Override
  public Lease renew(Lease lease, Duration duration) {
    Objects.requireNonNull(lease, "lease");
    requireDuration(duration);
    Instant estimate = estimatedStoreNow(Long.MAX_VALUE);
    Instant estimatedExpiry = (estimate != null ? estimate : lease.expiresAt()).plus(duration);
    BsonDocument renewed;
    try {
      renewed = forLease(duration).findOneAndUpdate(
          heldBy(lease),
          Updates.combine(
              Updates.currentDate(RENEWED_AT),
              Updates.currentDate(TOUCHED_AT),
              Updates.set(RENEWED_EPOCH, lease.epoch()),
              Updates.set(DURATION, duration.toMillis()),
              Updates.set(EXPIRES_AT, date(estimatedExpiry)),
              Updates.set(IDLE_SINCE, date(estimatedExpiry))),
          new FindOneAndUpdateOptions().projection(Projections.include(RENEWED_AT))
              .returnDocument(ReturnDocument.AFTER));
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("renew", lease.name(), e);
    }
    if (renewed == null) {
      throw lost(lease, "renewal matched no document with this owner and epoch");
    }
    return granted(lease.withExpiresAt(stamped(renewed, RENEWED_AT).plus(duration)), duration);
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
    // Another holder of the name in this process (rare) falls back to the operation timeout.
    bounds.released(lease.name());
    return result.getMatchedCount() > 0;
  }

  @Override
  public boolean delete(Lease lease) {
    Objects.requireNonNull(lease, "lease");
    return deleteWhen("delete", lease.name(), lease.epoch(), heldBy(lease), (record, now) -> true);
  }

  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    requireName(name);
    return deleteWhen("deleteIfIdle", name, epoch, and(eq("_id", name), eq(EPOCH, epoch)),
        (record, now) -> {
          Instant expiry = expiry(record);
          return ownerOf(record) == null || expiry == null || !expiry.isAfter(now);
        });
  }

  /**
   * A stamp of the record matching {@code filter}, then one conditional {@code deleteOne} of the
   * record exactly as stamped, if {@code idle} judges it so on the stamp (the shard's clock). A
   * re-created record starts at the shard's clock in microseconds (millisecond precision × 1000),
   * so a record is only deleted once that clock is past its epoch: one created, deleted and
   * re-created within one millisecond would otherwise repeat an epoch. Such a young record waits
   * for the clock to move on (at most {@value #MAX_CLOCK_WAIT_MICROS} µs of it, and one second of
   * asking); further ahead, only a clock that stepped back (or an epoch seeded by an earlier
   * version from a router's clock) explains it, and the record is kept (false).
   */
  private boolean deleteWhen(String action, String name, long epoch, Bson filter,
      BiPredicate<BsonDocument, Instant> idle) {
    // The process clock only bounds how long we keep asking; it judges nothing.
    long giveUpAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    try {
      while (true) {
        BsonDocument seen = leases.findOneAndUpdate(filter, Updates.currentDate(ASKED_AT),
            new FindOneAndUpdateOptions().returnDocument(ReturnDocument.AFTER));
        if (seen == null) {
          return false;
        }
        Instant now = stamped(seen, ASKED_AT);
        if (!idle.test(seen, now)) {
          return false;
        }
        long nowMicros = Math.multiplyExact(now.toEpochMilli(), 1000L);
        if (nowMicros > epoch) {
          return leases.deleteOne(asSeen(filter, seen)).getDeletedCount() == 1;
        }
        if (epoch - nowMicros > MAX_CLOCK_WAIT_MICROS || System.nanoTime() - giveUpAt > 0) {
          return false;
        }
      }
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, name, e);
    }
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    try {
      BsonDocument doc = leases.find(and(eq("_id", name), exists(EPOCH))).first();
      return Optional.ofNullable(doc).map(d -> toRecord(d, storeNow("read", name)));
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("read", name, e);
    }
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    Objects.requireNonNull(prefix, "prefix");
    List<LeaseRecord> records = new ArrayList<>();
    try {
      // Records granted at least once: not a bare stamp, not the clock document.
      Bson granted = exists(EPOCH);
      Bson filter = prefix.isEmpty() ? granted : and(regex("_id", "^" + Pattern.quote(prefix)), granted);
      List<BsonDocument> docs = leases.find(filter).sort(Sorts.ascending("_id")).into(new ArrayList<>());
      if (docs.isEmpty()) {
        return records;
      }
      Instant now = storeNow("list", prefix + "*");
      for (BsonDocument d : docs) {
        records.add(toRecord(d, now));
      }
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure("list", prefix + "*", e);
    }
    return records;
  }

  @Override
  public Instant now() {
    return storeNow("read the server clock", null);
  }

  /** A change stream on the lease collection, on a daemon thread ({@link ReleaseWatch}). */
  @Override
  public AutoCloseable watchReleases(String prefix, java.util.function.Consumer<String> released) {
    Objects.requireNonNull(prefix, "prefix");
    Objects.requireNonNull(released, "released");
    return new ReleaseWatch(leases, prefix, released).start();
  }

  /**
   * The store's clock, the shard's: the last stamp this store received ({@code $currentDate} of
   * a grant, renewal, deletion or clock read) carried forward on this process's monotonic clock,
   * or, when that is older than {@value #MAX_ESTIMATE_AGE_NANOS} ns or there is none, a new stamp
   * of the clock document. The stamp was set before its reply arrived, so the value is never
   * ahead of the shard's clock (by more than the rate difference of two clocks over ten seconds)
   * and behind it by at most the reply's travel time. Only for reads and status: no decision is
   * made with it (each decision stamps the record it judges).
   */
  private Instant storeNow(String action, String name) {
    Instant estimate = estimatedStoreNow(MAX_ESTIMATE_AGE_NANOS);
    if (estimate != null) {
      return estimate;
    }
    try {
      return stamped(leases.findOneAndUpdate(eq("_id", CLOCK_ID), Updates.currentDate(ASKED_AT),
          new FindOneAndUpdateOptions().upsert(true).returnDocument(ReturnDocument.AFTER)), ASKED_AT);
    } catch (MongoServerException e) {
      // A user who may only read (an operator's status command) cannot stamp: for a read, which
      // decides nothing, the clock of the server answering hello will do (a router's, on a
      // sharded cluster). Not remembered as a stamp.
      try {
        return MongoServerTime.now(database);
      } catch (RuntimeException helloFailed) {
        e.addSuppressed(helloFailed);
        throw MongoLeaseFailures.failure(action, name, e);
      }
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, name, e);
    }
  }

  private synchronized Instant estimatedStoreNow(long maxAgeNanos) {
    if (lastStamp == null) {
      return null;
    }
    long age = System.nanoTime() - lastStampNanos;
    return age > maxAgeNanos ? null : lastStamp.plusNanos(Math.max(0, age));
  }

  /** The shard's clock as {@code field} of a record just returned; remembered for {@link #storeNow}. */
  private Instant stamped(BsonDocument record, String field) {
    long received = System.nanoTime();
    Instant at = Instant.ofEpochMilli(record.getDateTime(field).getValue());
    synchronized (this) {
      lastStamp = at;
      lastStampNanos = received;
    }
    return at;
  }

  private UpdateResult update(Lease lease, String action, Bson update) {
    try {
      return forLease(lease.name()).updateOne(heldBy(lease), update);
    } catch (MongoException e) {
      throw MongoLeaseFailures.failure(action, lease.name(), e);
    }
  }

  private static Bson heldBy(Lease lease) {
    return and(eq("_id", lease.name()), eq(OWNER, lease.owner()), eq(EPOCH, lease.epoch()));
  }

  /**
   * {@code filter}, and the record still as {@code seen}: same owner, epoch, renewal and expiry
   * (a stamp changes none of them; every grant, renewal and release changes at least one).
   */
  private static Bson asSeen(Bson filter, BsonDocument seen) {
    List<Bson> all = new ArrayList<>(List.of(filter));
    for (String field : List.of(OWNER, EPOCH, RENEWED_AT, RENEWED_EPOCH, EXPIRES_AT)) {
      BsonValue value = seen.get(field);
      all.add(value == null ? exists(field, false) : eq(field, value));
    }
    return and(all);
  }

  private static String ownerOf(BsonDocument d) {
    BsonValue owner = d.get(OWNER);
    return owner != null && owner.isString() ? owner.asString().getValue() : null;
  }

  /**
   * When the current grant expires on the shard's clock: {@code renewedAt + duration} if this
   * grant's own renewal set them ({@code renewedEpoch} = {@code epoch}); otherwise the
   * {@code expiresAt} of a grant by an earlier version of Sluice (judged then with a router's
   * {@code $$NOW}), or null if there is none.
   */
  static Instant expiry(BsonDocument d) {
    BsonValue renewedAt = d.get(RENEWED_AT);
    BsonValue renewedEpoch = d.get(RENEWED_EPOCH);
    BsonValue epoch = d.get(EPOCH);
    BsonValue duration = d.get(DURATION);
    if (renewedAt != null && renewedAt.isDateTime() && renewedEpoch != null && renewedEpoch.isNumber()
        && epoch != null && epoch.isNumber() && duration != null && duration.isNumber()
        && renewedEpoch.asNumber().longValue() == epoch.asNumber().longValue()) {
      return Instant.ofEpochMilli(renewedAt.asDateTime().getValue()).plusMillis(duration.asNumber().longValue());
    }
    BsonValue expiresAt = d.get(EXPIRES_AT);
    return expiresAt != null && expiresAt.isDateTime() ? Instant.ofEpochMilli(expiresAt.asDateTime().getValue()) : null;
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
        expiry(d),
        checkpointOf(d));
  }

  private static LeaseRecord toRecord(BsonDocument d, Instant now) {
    String owner = ownerOf(d);
    BsonValue epoch = d.get(EPOCH);
    return new LeaseRecord(
        d.getString("_id").getValue(),
        owner,
        epoch != null && epoch.isNumber() ? epoch.asNumber().longValue() : 0L,
        owner == null ? null : expiry(d),
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
