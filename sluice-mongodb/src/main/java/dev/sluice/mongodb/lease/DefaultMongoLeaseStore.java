package dev.sluice.mongodb.lease;

import static com.mongodb.client.model.Filters.and;
import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.lte;
import static com.mongodb.client.model.Filters.or;
import static com.mongodb.client.model.Filters.regex;

import com.mongodb.MongoCommandException;
import com.mongodb.MongoException;
import com.mongodb.MongoWriteException;
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
import dev.sluice.mongodb.internal.MongoErrors;
import dev.sluice.mongodb.internal.MongoServerTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
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

  private final MongoDatabase database;
  private final MongoCollection<BsonDocument> leases;

  DefaultMongoLeaseStore(
      MongoDatabase database, String collection, WriteConcern writeConcern, Duration ttl) {
    this.database = database;
    this.leases =
        database.getCollection(collection, BsonDocument.class).withWriteConcern(writeConcern);
    if (ttl != null) {
      leases.createIndex(
          Indexes.ascending(TOUCHED_AT),
          new IndexOptions().expireAfter(ttl.toSeconds(), TimeUnit.SECONDS));
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
    Instant now = now();
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
              .append(TOUCHED_AT, new BsonDateTime(now.toEpochMilli()));
      leases.insertOne(created);
      return Optional.of(toLease(created));
    } catch (MongoException e) {
      if (MongoErrors.isDuplicateKey(e)) {
        return Optional.empty();
      }
      throw storeFailure("acquire", name, e);
    }
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    Objects.requireNonNull(lease, "lease");
    requireDuration(duration);
    Instant now = now();
    Instant expiresAt = now.plus(duration);
    UpdateResult result =
        update(
            lease,
            "renew",
            Updates.combine(
                Updates.set(EXPIRES_AT, new Date(expiresAt.toEpochMilli())),
                Updates.set(TOUCHED_AT, new Date(now.toEpochMilli()))));
    if (result.getMatchedCount() == 0) {
      throw lost(lease, "renewal matched no document with this owner and epoch");
    }
    return lease.withExpiresAt(expiresAt);
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(checkpoint, "checkpoint");
    UpdateResult result = update(lease, "commit", Updates.set(CHECKPOINT, toBson(checkpoint)));
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
            Updates.combine(Updates.set(OWNER, BsonNull.VALUE), Updates.unset(EXPIRES_AT)));
    return result.getMatchedCount() > 0;
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    Instant now = now();
    try {
      BsonDocument doc = leases.find(eq("_id", name)).first();
      return Optional.ofNullable(doc).map(d -> toRecord(d, now));
    } catch (MongoException e) {
      throw storeFailure("read", name, e);
    }
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    Objects.requireNonNull(prefix, "prefix");
    Instant now = now();
    List<LeaseRecord> records = new ArrayList<>();
    try {
      Bson filter = prefix.isEmpty() ? new BsonDocument() : regex("_id", "^" + Pattern.quote(prefix));
      for (BsonDocument d : leases.find(filter).sort(Sorts.ascending("_id"))) {
        records.add(toRecord(d, now));
      }
    } catch (MongoException e) {
      throw storeFailure("list", prefix + "*", e);
    }
    return records;
  }

  @Override
  public Instant now() {
    return MongoServerTime.now(database);
  }

  private UpdateResult update(Lease lease, String action, Bson update) {
    Bson held = and(eq("_id", lease.name()), eq(OWNER, lease.owner()), eq(EPOCH, lease.epoch()));
    try {
      return leases.updateOne(held, update);
    } catch (MongoException e) {
      throw storeFailure(action, lease.name(), e);
    }
  }


  private static SluiceException storeFailure(String action, String name, MongoException e) {
    return new SluiceException(
        "MongoDB lease store could not " + action + " lease '" + name + "': " + e.getMessage(), e);
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
