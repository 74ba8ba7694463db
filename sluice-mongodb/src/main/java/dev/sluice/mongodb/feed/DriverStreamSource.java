package dev.sluice.mongodb.feed;

import static com.mongodb.client.model.Filters.ne;

import com.mongodb.ClientSessionOptions;
import com.mongodb.MongoClientException;
import com.mongodb.MongoCommandException;
import com.mongodb.ReadConcern;
import com.mongodb.client.ChangeStreamIterable;
import com.mongodb.client.ClientSession;
import com.mongodb.client.MongoChangeStreamCursor;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.MongoCursor;
import com.mongodb.client.cursor.TimeoutMode;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.FeedException;
import dev.sluice.mongodb.internal.MongoErrors;
import dev.sluice.mongodb.internal.MongoHello;
import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.internal.MongoServerTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.bson.BsonArray;
import org.bson.BsonBoolean;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.RawBsonDocument;
import org.bson.conversions.Bson;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The real {@link StreamSource}: the official driver. */
final class DriverStreamSource implements StreamSource {
  private static final Logger log = LoggerFactory.getLogger(DriverStreamSource.class);

  private final MongoClient client;
  private final String database;
  private final String collection;
  private final int batchSize;
  private final FullDocument fullDocument;
  private final FullDocumentBeforeChange fullDocumentBeforeChange;
  private final long maxAwaitMillis;
  private final List<Bson> pipeline;
  private volatile boolean imagesChecked;
  /** Until the server showed it has none: snapshot chunks are read at one cluster time. */
  private volatile boolean snapshotReads = true;
  private final MongoDatabase db;
  private final MongoDatabase local;

  /** Copies what it needs: changing the builder later does not change this source. */
  DriverStreamSource(MongoChangeFeed.Builder settings) {
    this.client = settings.client;
    this.database = settings.database;
    // Every call of the feed through this handle or its collections is bounded (docs/adr/0102):
    // the driver's defaults have no socket read timeout, and a half-open connection would hold a
    // partition's read, a snapshot round trip or a hello for ever.
    this.db = settings.boundedDatabase(settings.database);
    this.local = settings.boundedDatabase("local");
    this.collection = settings.collection;
    this.batchSize = settings.batchSize;
    this.fullDocument = settings.fullDocument;
    this.fullDocumentBeforeChange = settings.fullDocumentBeforeChange;
    this.maxAwaitMillis = settings.serverAwait.toMillis();
    List<Bson> stages = new ArrayList<>(settings.pipeline);
    if (settings.splitLargeEvents) {
      // Must be the last stage of the pipeline.
      stages.add(new BsonDocument("$changeStreamSplitLargeEvent", new BsonDocument()));
    }
    this.pipeline = List.copyOf(stages);
  }

  @Override
  public MongoChangeStreamCursor<RawBsonDocument> open(StreamStart start) {
    return open(start, false);
  }

  @Override
  public MongoChangeStreamCursor<RawBsonDocument> open(StreamStart start, boolean imagesWhenAvailable) {
    ChangeStreamIterable<BsonDocument> stream =
        db
            .getCollection(collection, BsonDocument.class)
            .watch(pipeline, BsonDocument.class)
            .batchSize(batchSize)
            .fullDocument(imagesWhenAvailable && fullDocument == FullDocument.REQUIRED
                ? FullDocument.WHEN_AVAILABLE : fullDocument)
            .fullDocumentBeforeChange(imagesWhenAvailable && fullDocumentBeforeChange == FullDocumentBeforeChange.REQUIRED
                ? FullDocumentBeforeChange.WHEN_AVAILABLE : fullDocumentBeforeChange)
            // Each tryNext is one getMore; a real server holds an idle one this long and
            // answers as soon as a change arrives (MongoFeedCursor backs off only when the
            // server answered at once without waiting).
            .maxAwaitTime(maxAwaitMillis, TimeUnit.MILLISECONDS);
    stream =
        start.resumeAfter() != null
            ? stream.resumeAfter(start.resumeAfter())
            : start.startAfter() != null
                ? stream.startAfter(start.startAfter())
                : stream.startAtOperationTime(start.startAtOperationTime());
    // Raw events: decoding happens in MongoFeedCursor, so an undecodable event becomes an error
    // naming its position instead of a codec exception deep inside the driver, and split event
    // fragments can be merged.
    MongoCursor<RawBsonDocument> cursor = stream.withDocumentClass(RawBsonDocument.class).cursor();
    if (cursor instanceof MongoChangeStreamCursor<RawBsonDocument> changeStreamCursor) {
      return changeStreamCursor;
    }
    cursor.close();
    throw new IllegalStateException(
        "MongoDB driver returned " + cursor.getClass() + " for a change stream; expected a "
            + "MongoChangeStreamCursor (driver version mismatch?)");
  }

  @Override
  public Optional<BsonTimestamp> oldestOplogTime() {
    BsonDocument hello = MongoHello.reply(db);
    if (MongoHello.isMongos(hello)) {
      // Each shard has its own oplog and mongos serves none: there is no one oldest entry.
      throw new ConfigurationException("MongoDB " + database + "." + collection + " is reached through"
          + " mongos (a sharded cluster): StartPoint.oldest() reads the oplog, which each shard keeps"
          + " for itself and mongos does not serve. Start the listener at a time (StartPoint.at(...),"
          + " service: bootstrap: at <time>) or at latest.");
    }
    // $natural order: the oplog is a capped collection in insertion (ts) order and has no index on
    // ts, so sorting by ts would scan and sort the whole oplog. On the primary: another member's
    // window may start later or earlier.
    BsonDocument first = oplog()
        .find(ne("op", "n"))
        .projection(Projections.include("ts"))
        .sort(new BsonDocument("$natural", new BsonInt32(1)))
        .limit(1)
        .first();
    if (first == null) {
      return Optional.empty();
    }
    BsonValue ts = first.get("ts");
    return ts != null && ts.isTimestamp() ? Optional.of(ts.asTimestamp()) : Optional.empty();
  }

  private MongoCollection<BsonDocument> oplog() {
    return MongoReads.primary(local.getCollection("oplog.rs", BsonDocument.class));
  }

  @Override
  public Optional<BsonTimestamp> newestOperationTime() {
    // A replica set member or mongos reports the newest operation time with every reply
    // (operationTime, and hello's lastWrite.opTime.ts). A server that reports neither (a
    // standalone server, the embedded test server) is asked for its newest oplog entry instead.
    BsonDocument reply = MongoHello.reply(db);
    BsonValue operationTime = reply.get("operationTime");
    if (operationTime != null && operationTime.isTimestamp()) {
      return Optional.of(operationTime.asTimestamp());
    }
    BsonValue lastWrite = reply.get("lastWrite");
    if (lastWrite != null && lastWrite.isDocument()
        && lastWrite.asDocument().get("opTime") instanceof BsonDocument opTime
        && opTime.get("ts") != null && opTime.get("ts").isTimestamp()) {
      return Optional.of(opTime.get("ts").asTimestamp());
    }
    if (MongoHello.isMongos(reply)) {
      // A router's own clock may run ahead of the cluster's: starting at its wall-clock second
      // would skip what was committed in between. Its operation time comes with any reply read
      // in a session; without one, refuse rather than guess.
      Optional<BsonTimestamp> inSession = operationTimeOfAPing();
      if (inSession.isPresent()) {
        return inSession;
      }
      throw new FeedException("MongoDB " + database + "." + collection + " is reached through mongos, which"
          + " reported no operation time (not in hello, not in a session): the start of latest cannot be"
          + " taken from the cluster, and a router's wall clock may run ahead of it and skip changes. Check"
          + " that the deployment supports sessions, or start at a time (StartPoint.at(...)).", null, true);
    }
    return newestOplogEntry();
  }

  /**
   * Just after the newest oplog entry the primary shows: oplog readers never see past a hole (a
   * write given an earlier time and not yet committed), so every change before this bound is
   * visible to a read started afterwards. Through mongos, or without read access to {@code local},
   * the server's newest operation time a second back, for the same reason.
   */
  BsonTimestamp readBound() {
    if (!MongoHello.isMongos(MongoHello.reply(db))) {
      try {
        Optional<BsonTimestamp> newest = newestOplogEntry();
        if (newest.isPresent()) {
          return new BsonTimestamp(newest.get().getTime(), newest.get().getInc() + 1);
        }
      } catch (MongoCommandException e) {
        if (e.getErrorCode() != 13) { // Unauthorized: no read access to local
          throw e;
        }
      }
    }
    return newestOperationTime()
        .map(ts -> new BsonTimestamp(ts.getTime() - 1, 0))
        .orElseGet(() -> new BsonTimestamp(StreamStart.timestampAtOrBefore(serverNow()).getTime() - 1, 0));
  }

  private Optional<BsonTimestamp> newestOplogEntry() {
    BsonDocument newest = oplog()
        .find()
        .projection(Projections.include("ts"))
        .sort(new BsonDocument("$natural", new BsonInt32(-1)))
        .limit(1)
        .first();
    BsonValue ts = newest == null ? null : newest.get("ts");
    return ts != null && ts.isTimestamp() ? Optional.of(ts.asTimestamp()) : Optional.empty();
  }

  private Optional<BsonTimestamp> operationTimeOfAPing() {
    try (ClientSession session = client.startSession()) {
      db.runCommand(session, new BsonDocument("ping", new BsonInt32(1)));
      return Optional.ofNullable(session.getOperationTime());
    } catch (MongoClientException e) {
      if (MongoErrors.isTransient(e)) {
        throw e; // a failover or an outage, not a deployment without sessions
      }
      return Optional.empty(); // no sessions on this deployment
    }
  }

  @Override
  public void checkFullDocumentMode() {
    boolean postImages = fullDocument == FullDocument.REQUIRED || fullDocument == FullDocument.WHEN_AVAILABLE;
    boolean preImages = fullDocumentBeforeChange != FullDocumentBeforeChange.OFF;
    if ((!postImages && !preImages) || imagesChecked) {
      return;
    }
    String wanted = (postImages ? "post-images, which fullDocument " + fullDocument.getValue() + " reads" : "")
        + (postImages && preImages ? ", and " : "")
        + (preImages ? "pre-images, which fullDocumentBeforeChange " + fullDocumentBeforeChange.getValue() + " reads"
            : "");
    BsonDocument listed = null;
    try {
      for (BsonDocument d : db.listCollections(BsonDocument.class)
          .filter(new BsonDocument("name", new BsonString(collection)))) {
        if (d.get("name") instanceof BsonString name && name.getValue().equals(collection)) {
          listed = d;
        }
      }
    } catch (MongoCommandException e) {
      if (e.getErrorCode() == 13) { // Unauthorized: the server refuses such a stream on its own
        log.warn("Cannot check that collection {}.{} keeps the {} (listCollections not permitted: {}); the"
            + " change stream will fail if it does not", database, collection, wanted, e.getErrorMessage());
        return;
      }
      throw e;
    }
    BsonValue option = listed == null ? null
        : listed.getDocument("options", new BsonDocument()).get("changeStreamPreAndPostImages");
    boolean enabled = option != null && option.isDocument()
        && option.asDocument().getBoolean("enabled", BsonBoolean.FALSE).getValue();
    if (!enabled) {
      throw new ConfigurationException("MongoDB collection " + database + "." + collection
          + (listed == null ? " does not exist, so it keeps no images" : " does not keep images")
          + ": it was asked for " + wanted + ". Enable them (MongoDB 6.0+) with"
          + " db.runCommand({collMod: \"" + collection + "\", changeStreamPreAndPostImages: {enabled: true}})"
          + (listed == null ? " after creating it, or create it with that option" : "")
          + (postImages ? ", or read with fullDocument updateLookup: domain events then still come from each"
              + " update's own changed fields, and the document is labelled CURRENT" : "")
          + (preImages ? (postImages ? "; or" : ", or") + " leave fullDocumentBeforeChange off" : "") + ".");
    }
    imagesChecked = true;
  }

  /**
   * A resume token names its collection by UUID (MongoDB 4.2+). When the checkpoint's token names
   * another collection of this database than this one, resuming there would read this stream from
   * another stream's place: refused, naming both. A token of a UUID no collection here has is left
   * to the server: an earlier incarnation of this collection (dropped and created again) meets the
   * drop and its invalidate, which {@link MongoChangeFeed.OnInvalidate} decides about; a
   * collection of another database or deployment is refused by the server (error 280). A
   * {@code startAfter} position is after an invalidate, of the collection as it was before the
   * drop, so it is never compared.
   */
  @Override
  public void checkCollection(StreamStart start) {
    if (start.resumeAfter() == null) {
      return;
    }
    UUID token = ResumeTokenData.of(start.resumeAfter()).map(ResumeTokenData::uuid).orElse(null);
    if (token == null) {
      return; // a high-water mark, or a token of a server that does not say
    }
    Map<UUID, String> names = new HashMap<>();
    try {
      for (BsonDocument listed : db.listCollections(BsonDocument.class)) {
        BsonValue info = listed.get("info");
        BsonValue uuid = info != null && info.isDocument() ? info.asDocument().get("uuid") : null;
        if (uuid != null && uuid.isBinary() && uuid.asBinary().getType() == 4 && uuid.asBinary().getData().length == 16
            && listed.get("name") instanceof BsonString name) {
          names.put(uuid.asBinary().asUuid(), name.getValue());
        }
      }
    } catch (MongoCommandException e) {
      if (e.getErrorCode() == 13) { // Unauthorized: the server still refuses a token it cannot find (280)
        log.warn("Cannot check that the checkpoint of {}.{} is of this collection (listCollections not permitted: {})",
            database, collection, e.getErrorMessage());
        return;
      }
      throw e;
    }
    String named = names.get(token);
    if (named == null || named.equals(collection)) {
      return;
    }
    UUID own = names.entrySet().stream().filter(e -> e.getValue().equals(collection)).map(Map.Entry::getKey)
        .findFirst().orElse(null);
    throw new FeedException("MongoDB change stream '" + database + "." + collection + "' cannot resume at its"
        + " checkpoint " + start + ": the resume token is of collection " + database + "." + named + " (UUID " + token
        + "), not of " + database + "." + collection + (own == null ? " (which does not exist now)" : " (UUID " + own + ")")
        + ": a checkpoint written for another stream, or restored onto the wrong one. Nothing was read or skipped."
        + " Restore the checkpoint written for '" + database + "." + collection + "'; if it is lost, delete this"
        + " group's checkpoint records of '" + database + "." + collection + "' and start it with the snapshot"
        + " bootstrap (BootstrapPolicy.snapshot(), service: bootstrap: snapshot), which delivers every document (starting"
        + " at latest would skip every change since).", null, false);
  }

  /**
   * A snapshot read where the deployment has them (replica sets and sharded clusters, MongoDB 5.0+):
   * the chunk is read at one cluster time, which the server names, so nothing is in doubt. Where
   * it has none (a standalone server, majority reads turned off, the embedded test server: a
   * capability found out once), the read is bracketed by the newest visible oplog entry before it
   * and the newest operation time after it ({@code docs/adr/0066}).
   */
  @Override
  public SnapshotChunk readChunk(BsonValue afterId, SnapshotScope scope, int limit) {
    BsonDocument filter = chunkFilter(afterId, scope);
    if (snapshotReads) {
      try (ClientSession session = client.startSession(ClientSessionOptions.builder().snapshot(true).build())) {
        List<RawBsonDocument> out = new ArrayList<>(limit);
        chunkQuery(session, filter, limit).into(out);
        BsonTimestamp at = session.getSnapshotTimestamp();
        if (at != null) {
          return new SnapshotChunk(out, new BsonTimestamp(at.getTime(), at.getInc() + 1), at);
        }
        noSnapshotReads("the server named no snapshot time");
      } catch (MongoClientException e) {
        // Sessions refused by the client because the deployment has none; anything else (a
        // timeout, a pool cleared by a failover, during which the cluster description names no
        // session timeout either) is not a missing capability and goes to the caller.
        if (MongoErrors.isTransient(e)
            || client.getClusterDescription().getLogicalSessionTimeoutMinutes() != null) {
          throw e;
        }
        noSnapshotReads(e.getMessage());
      } catch (MongoCommandException e) {
        if (!SNAPSHOT_READS_UNSUPPORTED.contains(e.getErrorCode())) {
          throw e;
        }
        noSnapshotReads(e.getErrorCodeName() + ": " + e.getErrorMessage());
      }
    }
    BsonTimestamp low = readBound();
    List<RawBsonDocument> out = new ArrayList<>(limit);
    chunkQuery(null, filter, limit).into(out);
    return new SnapshotChunk(out, low, newestOperationTime().orElse(null));
  }

  /** Error codes of a server that cannot read at a snapshot: IllegalOperation, InvalidOptions, NotAReplicaSet, ReadConcernMajorityNotEnabled. */
  private static final Set<Integer> SNAPSHOT_READS_UNSUPPORTED = Set.of(20, 72, 123, 148);

  private void noSnapshotReads(String why) {
    snapshotReads = false;
    log.info("MongoDB {}.{}: no snapshot reads ({}); snapshot chunks are bracketed by operation times instead",
        database, collection, why);
  }

  private com.mongodb.client.FindIterable<RawBsonDocument> chunkQuery(ClientSession session, BsonDocument filter, int limit) {
    // Local, not majority: a bracketed read must hold every write before its low bound, and a
    // majority snapshot may lag behind it. (A snapshot session reads at its own time.)
    MongoCollection<RawBsonDocument> documents = MongoReads.primary(db.getCollection(collection, RawBsonDocument.class));
    if (session == null) {
      documents = documents.withReadConcern(ReadConcern.LOCAL);
    }
    var find = session == null ? documents.find(filter) : documents.find(session, filter);
    // The collection's timeout bounds each round trip (the find, then each getMore), not the whole
    // chunk: a chunk of large documents takes many round trips, and bounding them together timed
    // out every read of such a chunk, for ever (docs/adr/0085).
    return find.sort(new BsonDocument("_id", new BsonInt32(1))).limit(limit).batchSize(limit)
        .timeoutMode(TimeoutMode.ITERATION);
  }

  /** The bound of each round trip of a chunk read: the timeout of the handle it is read through. */
  @Override
  public Duration chunkRoundTripBound() {
    Long millis = MongoReads.primary(db.getCollection(collection)).getTimeout(TimeUnit.MILLISECONDS);
    return millis == null ? null : Duration.ofMillis(millis);
  }

  /** The {@code _id}s after {@code afterId} (or from the scope's first) through the scope's last. */
  static BsonDocument chunkFilter(BsonValue afterId, SnapshotScope scope) {
    List<BsonDocument> bounds = new ArrayList<>(2);
    if (afterId != null) {
      bounds.add(after(afterId));
    } else if (scope.from() != null) {
      bounds.add(bound("$gte", scope.from(), BsonOrder.typesAfter(scope.from().getBsonType())));
    }
    if (scope.to() != null) {
      bounds.add(bound("$lte", scope.to(), BsonOrder.typesBefore(scope.to().getBsonType())));
    }
    return switch (bounds.size()) {
      case 0 -> new BsonDocument();
      case 1 -> bounds.get(0);
      default -> new BsonDocument("$and", new BsonArray(bounds));
    };
  }

  /**
   * Every {@code _id} after {@code id} in sort order: {@code $gt} compares within the value's own
   * type bracket only, so the brackets that sort after it are added by {@code $type}.
   */
  static BsonDocument after(BsonValue id) {
    return bound("$gt", id, BsonOrder.typesAfter(id.getBsonType()));
  }

  /** {@code _id} compared by {@code op} within {@code id}'s bracket, or of one of {@code otherBrackets}. */
  private static BsonDocument bound(String op, BsonValue id, List<Integer> otherBrackets) {
    BsonDocument within = new BsonDocument("_id", new BsonDocument(op, id));
    if (otherBrackets.isEmpty() || BsonOrder.bracket(id.getBsonType()) == 0) {
      return within;
    }
    BsonArray types = new BsonArray();
    otherBrackets.forEach(t -> types.add(new BsonInt32(t)));
    BsonDocument ofOtherType = new BsonDocument("_id", new BsonDocument("$type", types));
    return new BsonDocument("$or", new BsonArray(List.of(within, ofOtherType)));
  }

  @Override
  public Instant serverNow() {
    return MongoServerTime.now(db);
  }
}
