package dev.sluice.mongodb.feed;

import com.mongodb.MongoException;
import dev.sluice.mongodb.internal.MongoErrors;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.Updates;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.mongodb.internal.MongoReads;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonObjectId;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The re-snapshot requests of one stream ({@code docs/adr/0067}): documents in a collection of the
 * stream's database (default {@value MongoChangeFeed#DEFAULT_SNAPSHOT_REQUESTS}), one per request,
 * written by {@link MongoChangeFeed#requestSnapshot}, {@code sluice snapshot}, or by hand:
 *
 * <pre>{@code {_id: <any>, group: "orders-relay", stream: "shop.orders", from: <_id>, to: <_id>,
 *   requestedAt: <date>, done: {"0of3": <date>, ...}}}</pre>
 *
 * <p>{@code group} and {@code stream} are required, {@code from}, {@code to} and {@code requestedAt}
 * optional; partitions add {@code done}. Requests are taken in {@code requestedAt} order, then
 * {@code _id}. A group's partitions read them through one instance, which asks the server at most
 * once per check interval; thread-safe.
 */
final class SnapshotRequests {
  private static final Logger LOG = LoggerFactory.getLogger(SnapshotRequests.class);
  private static final Duration WARN_EVERY = Duration.ofMinutes(10);

  private final MongoCollection<BsonDocument> requests;
  private final String stream;
  private final String group;
  private final Duration interval;
  private List<Pending> cached = List.of();
  private long cachedAt;
  private boolean cacheValid;
  private long lastWarning;
  private boolean failing;
  private final java.util.Set<BsonValue> warnedInvalid = new java.util.HashSet<>();

  /** A request as a partition sees it: its {@code _id} as stored, and what it asks for. */
  record Pending(BsonValue id, SnapshotRequest request) {}

  SnapshotRequests(MongoDatabase database, String collection, String stream, String group, Duration interval) {
    this.requests = collection(database, collection);
    this.stream = stream;
    this.group = group;
    this.interval = interval;
  }

  String collection() {
    return requests.getNamespace().getFullName();
  }

  /** Writes a request of {@code group}; its id is a new ObjectId (so requests sort by time too). */
  static SnapshotRequest insert(MongoDatabase database, String collection, String stream, String group,
      BsonValue fromId, BsonValue toId) {
    ConfigurationException.require(group != null && !group.isBlank(), "group", group, "must not be blank");
    BsonObjectId id = new BsonObjectId();
    Instant now = Instant.ofEpochMilli(System.currentTimeMillis());
    BsonDocument doc = new BsonDocument("_id", id).append("group", new BsonString(group))
        .append("stream", new BsonString(stream)).append("requestedAt", new BsonDateTime(now.toEpochMilli()));
    if (fromId != null) {
      doc.append("from", fromId);
    }
    if (toId != null) {
      doc.append("to", toId);
    }
    collection(database, collection).insertOne(doc);
    return toRequest(doc);
  }

  /** Every request of {@code group} on {@code stream}, in the order they are taken. */
  static List<SnapshotRequest> list(MongoDatabase database, String collection, String stream, String group) {
    List<SnapshotRequest> out = new ArrayList<>();
    for (BsonDocument d : find(collection(database, collection), stream, group)) {
      out.add(toRequest(d));
    }
    return out;
  }

  /** Sluice's own records: on the primary, majority reads and writes (MongoReads). */
  private static MongoCollection<BsonDocument> collection(MongoDatabase database, String name) {
    return MongoReads.ownRecords(database.getCollection(name, BsonDocument.class));
  }

  private static List<BsonDocument> find(MongoCollection<BsonDocument> requests, String stream, String group) {
    return requests.find(Filters.and(Filters.eq("group", group), Filters.eq("stream", stream)))
        .sort(Sorts.ascending("requestedAt", "_id")).into(new ArrayList<>());
  }

  /**
   * The first request {@code partition} has not done yet, if any. Asks the server when the last
   * answer is older than the check interval; when the server cannot be asked, says so in a
   * warning (at most every ten minutes) and answers from what it last knew.
   */
  synchronized Optional<Pending> next(PartitionSpec partition) {
    long now = System.nanoTime();
    if (!cacheValid || now - cachedAt >= interval.toNanos()) {
      try {
        List<Pending> read = new ArrayList<>();
        for (BsonDocument d : find(requests, stream, group)) {
          read.add(new Pending(d.get("_id"), toRequest(d)));
        }
        cached = read;
        if (readFailure != null) {
          LOG.info("Re-snapshot requests of '{}' for group '{}' in {} can be read again", stream, group, collection());
        }
        readFailure = null;
        failing = markFailure != null;
      } catch (MongoException e) {
        readFailure = "cannot read the re-snapshot requests of '" + stream + "' for group '" + group + "' in "
            + collection() + " (a requested re-snapshot starts once they can be read; the change stream goes on;"
            + " tried again every " + interval + "): " + MongoErrors.describe(e);
        warn(now, readFailure);
      }
      cachedAt = now;
      cacheValid = true;
    }
    for (Pending p : cached) {
      String invalid = invalid(p.request().fromId(), p.request().toId());
      if (invalid != null) {
        if (warnedInvalid.add(p.id())) {
          LOG.warn("Re-snapshot request " + SnapshotProgress.shown(p.id()) + " in " + collection() + " is ignored: "
              + invalid);
        }
      } else if (!p.request().doneBy(partition)) {
        return Optional.of(p);
      }
    }
    return Optional.empty();
  }

  /** Why a request with these bounds (written by hand) cannot be served, or null. */
  static String invalid(BsonValue fromId, BsonValue toId) {
    for (BsonValue bound : new BsonValue[] {fromId, toId}) {
      if (bound != null && (bound.isArray() || BsonOrder.bracket(bound.getBsonType()) == 0)) {
        return "'from' and 'to' must be _id values (no array, no " + bound.getBsonType() + ")";
      }
    }
    return null;
  }

  /**
   * Records that {@code partition} read the last chunk of request {@code id}.
   *
   * @return whether it was recorded (false: the server could not be reached, or the request was
   *     deleted; tried again by the caller while it matters)
   */
  boolean markDone(BsonValue id, PartitionSpec partition) {
    String key = SnapshotRequest.partitionKey(partition);
    try {
      boolean found = requests.updateOne(Filters.eq("_id", id),
          Updates.set("done." + key, new BsonDateTime(System.currentTimeMillis()))).getMatchedCount() == 1;
      synchronized (this) {
        cacheValid = false; // the next check sees the partition done
        markFailure = null;
        failing = readFailure != null;
      }
      if (!found) {
        LOG.warn("Re-snapshot request {} of '{}' for group '{}' was deleted from {} before partition {} finished; its"
            + " re-read is complete", SnapshotProgress.shown(id), stream, group, collection(), key);
      }
      return true;
    } catch (com.mongodb.MongoWriteConcernException e) {
      // Recorded on the primary, not yet confirmed by a majority: done. Should a failover roll it
      // back, the partition takes the request up again and reads its keys once more (at least once).
      LOG.warn("Partition {} of group '{}' recorded re-snapshot request {} done without a majority's confirmation: {}",
          key, group, SnapshotProgress.shown(id), e.getMessage());
      synchronized (this) {
        cacheValid = false;
        markFailure = null;
        failing = readFailure != null;
      }
      return true;
    } catch (MongoException e) {
      synchronized (this) {
        markFailure = "cannot record in " + collection() + " that partition " + key + " of group '"
            + group + "' finished re-snapshot request " + SnapshotProgress.shown(id) + " of '" + stream
            + "' (the change stream goes on; tried again every " + interval + "): " + MongoErrors.describe(e);
        warn(System.nanoTime(), markFailure);
      }
      return false;
    }
  }

  /** Why reading the requests fails now, or null. */
  private String readFailure;
  /** Why recording a partition done fails now, or null. */
  private String markFailure;

  /** What fails now and is tried again (reading the requests, recording one done), or null. */
  synchronized String failure() {
    return readFailure != null ? readFailure : markFailure;
  }

  private void warn(long now, String message) {
    if (!failing || now - lastWarning >= WARN_EVERY.toNanos()) {
      LOG.warn(message);
      lastWarning = now;
    }
    failing = true;
  }

  private static SnapshotRequest toRequest(BsonDocument d) {
    Map<String, Instant> done = new LinkedHashMap<>();
    if (d.get("done") instanceof BsonDocument marks) {
      marks.forEach((partition, at) -> done.put(partition,
          at instanceof BsonDateTime t ? Instant.ofEpochMilli(t.getValue()) : Instant.EPOCH));
    }
    Instant requestedAt = d.get("requestedAt") instanceof BsonDateTime t ? Instant.ofEpochMilli(t.getValue()) : null;
    BsonValue id = d.get("_id");
    return new SnapshotRequest(MongoEvents.keyOf(id), d.getString("group").getValue(),
        d.getString("stream").getValue(), d.get("from"), d.get("to"), requestedAt, done);
  }
}
