package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.AbstractCursor;
import de.bwaldvogel.mongo.backend.Cursor;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.Utils;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.HashMap;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * The embedded server's oplog, rewritten so that its change events are what a real replica set
 * sends (shared/embedded-servers.md lists what the stock one gets wrong), and so that it can lose
 * history:
 *
 * <ul>
 *   <li>an update event's {@code documentKey} is {@code {_id}} (the stock oplog puts the update
 *       document there), it carries {@code updateDescription} with {@code updatedFields} (the
 *       value each updated path has after this update) and {@code removedFields}, and
 *       {@code fullDocument: updateLookup} returns the document as it is now, or {@code null} once
 *       it was deleted (the stock oplog returns the {@code $set} delta);
 *   <li>a replacement ({@code replaceOne}) is a {@code replace} event with the new document, not an
 *       update;
 *   <li>{@code fullDocument: whenAvailable} / {@code required} return the post-image recorded with
 *       the entry when the collection had {@code changeStreamPreAndPostImages} enabled at the write
 *       ({@link FaithfulDatabase}); without it, whenAvailable returns none and required fails;
 *       {@code fullDocumentBeforeChange} likewise returns the pre-image of updates, replacements
 *       and deletes: the document as the previous write left it, kept per document while images
 *       are enabled (from the moment they are, as a real server records them);
 *   <li>dropping a collection shows in that collection's streams only: a {@code drop} event, then
 *       {@code invalidate}, after which the cursor returns nothing more; {@code resumeAfter} the
 *       drop returns the invalidate again, {@code resumeAfter} the invalidate fails with error
 *       260, {@code startAfter} it continues with what follows (the stock oplog put any drop into
 *       every stream of the database and never invalidated);
 *   <li>{@link #trimBefore} deletes old entries; opening a change stream at a point before the
 *       retained history (or at a token whose own entry is gone) then fails with error 286
 *       (ChangeStreamHistoryLost), as on a real server, and an open cursor whose next entry was
 *       deleted answers its next getMore with error 136 (CappedPositionLost) and is closed, as a
 *       real server's oplog scan dies when the capped oplog overwrote its position;
 *   <li>resume tokens are a real server's ({@link ResumeTokens}): cluster time, token type,
 *       {@code txnOpIndex}, {@code fromInvalidate}, the collection's UUID (each collection has
 *       one, listed by {@code listCollections}, new after a drop) and the document key. Opened at
 *       an event's token, a stream fails with 280 once it passes where that event would be
 *       without meeting it (a token of another collection); a batch without an event of the
 *       stream ends with a high-water-mark token (the stock oplog's tokens held only a time);
 *   <li>a committed multi-document transaction ({@link Transactions}) is one {@code applyOps}
 *       entry with one timestamp: its events share the cluster time, carry {@code lsid} and
 *       {@code txnNumber}, and differ by the index in their tokens.
 * </ul>
 *
 * <p>Each entry's timestamp is taken and the entry stored under one lock, so a reader never sees a
 * later entry before an earlier one (the stock oplog can, and a cursor then skips the earlier).
 *
 * <p>A change stream reads the oplog from its position on, in timestamp order, as a real server
 * does: a getMore costs the entries it passes, not the whole oplog (the stock oplog scans and sorts
 * every entry on every getMore, so reading N changes cost N squared over the batch size and a
 * benchmark against it measured the scan).
 *
 * <p>Limits that remain: the values in {@code updatedFields} are read from the document right after
 * the update, so two connections updating one document at the same instant can see each other's
 * values (the embedded server does not serialize writes); a positional path ({@code a.$.b}) is
 * reported as the whole array {@code a}, as servers before 5.0 did; only drops (no renames,
 * no {@code $out}) invalidate; images expire when read past their time (a real server deletes them
 * in a background job, so there they may outlive {@code expireAfterSeconds} a little).
 */
final class FaithfulOplog implements Oplog {
  private static final String UPDATE_DESCRIPTION = "sluiceUpdateDescription";
  private static final String POST_IMAGE = "sluicePostImage";
  private static final String PRE_IMAGE = "sluicePreImage";
  private static final String REPLACE = "sluiceReplace";
  /** The op of the entry standing for the invalidate event that follows a drop. */
  private static final String INVALIDATE = "sluiceInvalidate";
  /** An operation's index inside its transaction's applyOps entry (as the token's txnOpIndex). */
  private static final String TXN_OP_INDEX = "sluiceTxnOpIndex";
  private static final Set<String> VALUE_OPERATORS = Set.of("$set", "$inc", "$mul", "$min", "$max",
      "$currentDate", "$push", "$addToSet", "$pull", "$pullAll", "$pop", "$bit");

  private final MongoBackend backend;
  private final MongoCollection<Document> entries;
  private final CursorRegistry cursors;
  private final Clock clock;
  private final AtomicInteger increment = new AtomicInteger();
  /** The newest timestamp given to an entry; guarded by this object's lock. */
  private BsonTimestamp latest;
  private volatile BsonTimestamp trimmedThrough;
  /** {@code changeStreamOptions.preAndPostImages.expireAfterSeconds}; null: off (the default). */
  private volatile Long imagesExpireAfterSeconds;
  /** Images of entries written before this are deleted (expired once); null: none is. */
  private volatile java.time.Instant imagesGoneBefore;
  private final Object expiry = new Object();
  private final Set<String> withImages;
  /** Per document of a collection with images: its current state, the next change's pre-image. */
  private final Map<String, Document> images = new HashMap<>();
  /** Each collection's UUID, as a real server gives one to each collection it creates. */
  private final Map<String, UUID> uuids = new ConcurrentHashMap<>();
  /** While a transaction commits: the entries its writes make, to store as one applyOps entry. */
  private List<Document> captured;
  /**
   * The stored entries by timestamp (the same instances as in {@link #entries}): a change stream
   * reads from its position on, as a real server reads its oplog from the resume point, instead of
   * scanning and sorting the whole collection on every getMore.
   */
  private volatile ConcurrentSkipListMap<BsonTimestamp, Document> byTime = new ConcurrentSkipListMap<>();
  /** The collection was written to directly (a test editing the oplog): rebuild {@link #byTime}. */
  private volatile boolean edited;

  FaithfulOplog(MongoBackend backend, MongoCollection<Document> entries, CursorRegistry cursors,
      Set<String> withImages) {
    this.withImages = withImages;
    this.backend = backend;
    this.entries = entries;
    this.cursors = cursors;
    this.clock = backend.getClock();
  }

  /**
   * Deletes every entry older than {@code ts}; returns how many. How far history is lost is set
   * before the first entry goes, so a cursor that scanned while entries went sees it afterwards
   * ({@link ChangeStreamCursor#takeDocuments}).
   */
  synchronized int trimBefore(BsonTimestamp ts) {
    List<Document> old = new ArrayList<>();
    BsonTimestamp through = trimmedThrough;
    for (Document entry : entries.queryAll()) {
      BsonTimestamp t = timestamp(entry);
      if (t.compareTo(ts) < 0) {
        old.add(entry);
        if (through == null || t.compareTo(through) > 0) {
          through = t;
        }
      }
    }
    trimmedThrough = through;
    for (Document entry : old) {
      entries.removeDocument(entry);
      byTime.remove(timestamp(entry), entry);
    }
    return old.size();
  }

  /** The newest timestamp of a trimmed entry, or null if none was trimmed. */
  BsonTimestamp trimmedThrough() {
    return trimmedThrough;
  }

  /** Images older than this, on the server's clock, are gone; null: they never expire. */
  void imagesExpireAfter(Long seconds) {
    imagesExpireAfterSeconds = seconds;
  }

  Long imagesExpireAfterSeconds() {
    return imagesExpireAfterSeconds;
  }

  /**
   * The image {@code field} of {@code entry}, or null if none was recorded or it has expired. An
   * expired image stays gone (a real server deletes it), also if the expiry is raised or turned off
   * afterwards.
   */
  private Object image(Document entry, String field) {
    Object image = entry.get(field);
    if (image == null || !(entry.get("wall") instanceof java.time.Instant wall)) {
      return image;
    }
    Long expire = imagesExpireAfterSeconds;
    java.time.Instant gone = imagesGoneBefore;
    if (expire != null) {
      java.time.Instant now = clock.instant().minusSeconds(expire);
      synchronized (expiry) {
        if (imagesGoneBefore == null || now.isAfter(imagesGoneBefore)) {
          imagesGoneBefore = now;
        }
        gone = imagesGoneBefore;
      }
    }
    return gone != null && wall.isBefore(gone) ? null : image;
  }

  /**
   * The timestamp through which every entry is stored: taken under the lock the writers hold from
   * timestamping an entry until it is stored, so a scan that starts after this call sees every
   * entry up to it.
   */
  synchronized BsonTimestamp storedThrough() {
    return latest;
  }

  /** The newest entry's timestamp, if any: what a replica set reports as its operation time. */
  BsonTimestamp newest() {
    NavigableMap<BsonTimestamp, Document> index = index();
    return index.isEmpty() ? null : index.lastKey();
  }

  /** The stored entries in oplog order, oldest first or newest first; read lazily. */
  Iterable<Document> inOrder(boolean ascending) {
    NavigableMap<BsonTimestamp, Document> index = index();
    return ascending ? index.values() : index.descendingMap().values();
  }

  /**
   * {@link #byTime}, rebuilt from the collection first if that was written to directly: into a new
   * map, so that a cursor reading the old one meanwhile still sees every entry it had.
   */
  private synchronized NavigableMap<BsonTimestamp, Document> index() {
    if (edited) {
      edited = false;
      ConcurrentSkipListMap<BsonTimestamp, Document> rebuilt = new ConcurrentSkipListMap<>();
      entries.queryAll().forEach(e -> rebuilt.put(timestamp(e), e));
      byTime = rebuilt;
    }
    return byTime;
  }

  /** Stores new entries in the collection and the index (callers hold this object's lock). */
  private void store(List<Document> added) {
    if (captured != null) {
      captured.addAll(added);
      return;
    }
    entries.addDocuments(added.stream());
    added.forEach(e -> byTime.put(timestamp(e), e));
  }

  /** A write to the oplog collection itself (tests edit entries): the index is rebuilt before the next read. */
  private boolean isOplogWrite(String namespace) {
    if (isOplog(namespace)) {
      edited = true;
      return true;
    }
    return false;
  }

  // ---- writing entries --------------------------------------------------------------------

  @Override
  public synchronized void handleInsert(String namespace, List<Document> documents) {
    if (isOplogWrite(namespace)) {
      return;
    }
    store(documents.stream().map(d -> entry("i", namespace).append("o", d.cloneDeeply())).toList());
    if (withImages.contains(namespace)) {
      documents.forEach(d -> images.put(imageKey(namespace, d.get("_id")), d.cloneDeeply()));
    }
  }

  /** Images were enabled on {@code namespace}: from now on each change's pre-image is recorded. */
  synchronized void imagesEnabled(String namespace, Iterable<Document> current) {
    current.forEach(d -> images.put(imageKey(namespace, d.get("_id")), d.cloneDeeply()));
  }

  private static String imageKey(String namespace, Object id) {
    return namespace + "|" + (id == null ? "null" : id.getClass().getName() + ":" + id);
  }

  /** The pre-image of a change of {@code id}, and {@code after} as the next one's. */
  private Document preImage(String namespace, Object id, Document after) {
    if (!withImages.contains(namespace)) {
      return null;
    }
    String key = imageKey(namespace, id);
    return after == null ? images.remove(key) : images.put(key, after.cloneDeeply());
  }

  @Override
  public synchronized void handleUpdate(String namespace, Document selector, Document update, List<Object> modifiedIds) {
    if (isOplogWrite(namespace)) {
      return;
    }
    boolean replacement = update.keySet().stream().noneMatch(k -> k.startsWith("$"));
    List<Document> out = new ArrayList<>();
    for (Object id : modifiedIds) {
      Document after = current(namespace, id);
      Document e = entry("u", namespace).append("o2", new Document("_id", id));
      Document pre = preImage(namespace, id, after);
      if (pre != null) {
        e.append(PRE_IMAGE, pre);
      }
      if (replacement) {
        e.append("o", after == null ? update.cloneDeeply() : after).append(REPLACE, true);
      } else {
        e.append("o", update.cloneDeeply()).append(UPDATE_DESCRIPTION, describe(update, after));
        if (after != null && withImages.contains(namespace)) {
          e.append(POST_IMAGE, after); // recorded at write time, only where the collection keeps images
        }
      }
      out.add(e);
    }
    store(out);
  }

  @Override
  public synchronized void handleDelete(String namespace, Document query, List<Object> deletedIds) {
    if (isOplogWrite(namespace)) {
      return;
    }
    store(deletedIds.stream().map(id -> {
      Document e = entry("d", namespace).append("o", new Document("_id", id));
      Document pre = preImage(namespace, id, null);
      return pre == null ? e : e.append(PRE_IMAGE, pre);
    }).toList());
  }

  @Override
  public synchronized void handleDropCollection(String namespace) {
    if (isOplogWrite(namespace)) {
      return;
    }
    withImages.remove(namespace);
    images.keySet().removeIf(k -> k.startsWith(namespace + "|"));
    // As on a real server: the drop, then the invalidate that ends every stream on the collection
    // (an entry of its own, so that it has a resume token of its own).
    store(List.of(entry("c", namespace).append("o", new Document("drop", Utils.getCollectionNameFromFullName(namespace)))));
    store(List.of(entry(INVALIDATE, namespace)));
    uuids.remove(namespace); // created again, it is another collection
  }

  /**
   * Runs a transaction's writes and stores what they write as one {@code applyOps} entry with one
   * timestamp, as a real server logs a committed transaction; the caller holds the server's write
   * lock, so no reader sees part of it.
   */
  synchronized void commitTransaction(Runnable writes, Document lsid, long txnNumber) {
    captured = new ArrayList<>();
    List<Document> ops;
    try {
      writes.run();
    } finally {
      ops = captured;
      captured = null;
    }
    if (ops.isEmpty()) {
      return;
    }
    List<Document> inner = new ArrayList<>(ops.size());
    for (Document op : ops) {
      Document o = new Document(op);
      o.remove("ts");
      o.remove("t");
      o.remove("v");
      o.remove("wall");
      inner.add(o);
    }
    Document entry = entry("c", "admin.$cmd").append("o", new Document("applyOps", inner))
        .append("lsid", lsid).append("txnNumber", txnNumber);
    entry.remove("ui");
    store(List.of(entry));
  }

  private Document entry(String op, String namespace) {
    BsonTimestamp ts = new BsonTimestamp(clock.instant(), increment.incrementAndGet());
    latest = ts; // callers hold this object's lock until the entry is stored
    return new Document()
        .append("ts", ts)
        .append("t", 1L)
        .append("v", 2L)
        .append("op", op)
        .append("ns", namespace)
        .append("ui", namespace.endsWith(".$cmd") ? null : uuidOf(namespace))
        .append("wall", clock.instant());
  }

  /** What a real server reports for a modifier update: the updated paths' new values, the removed paths. */
  private static Document describe(Document update, Document after) {
    Document updated = new Document();
    List<String> removed = new ArrayList<>();
    for (Map.Entry<String, Object> op : update.entrySet()) {
      if (!(op.getValue() instanceof Document paths)) {
        continue;
      }
      if ("$unset".equals(op.getKey())) {
        removed.addAll(paths.keySet().stream().map(FaithfulOplog::beforePositional).toList());
      } else if ("$rename".equals(op.getKey())) {
        for (Map.Entry<String, Object> r : paths.entrySet()) {
          removed.add(r.getKey());
          putValue(updated, after, String.valueOf(r.getValue()));
        }
      } else if (VALUE_OPERATORS.contains(op.getKey())) {
        for (String path : paths.keySet()) {
          putValue(updated, after, beforePositional(path));
        }
      }
    }
    return new Document("updatedFields", updated)
        .append("removedFields", removed)
        .append("truncatedArrays", List.of());
  }

  private static void putValue(Document updated, Document after, String path) {
    if (after == null) {
      return;
    }
    Object value = valueAt(after, path);
    if (value != Missing.VALUE) {
      updated.put(path, value instanceof Document d ? d.cloneDeeply() : value);
    }
  }

  /** {@code a.$.b}, {@code a.$[].b}, {@code a.$[x].b}: the whole array {@code a}. */
  private static String beforePositional(String path) {
    int dollar = path.indexOf(".$");
    return dollar < 0 ? path : path.substring(0, dollar);
  }

  private enum Missing { VALUE }

  private static Object valueAt(Document doc, String path) {
    Object current = doc;
    for (String part : path.split("\\.")) {
      if (current instanceof Document d && d.containsKey(part)) {
        current = d.get(part);
      } else if (current instanceof List<?> list && part.chars().allMatch(Character::isDigit)
          && Integer.parseInt(part) < list.size()) {
        current = list.get(Integer.parseInt(part));
      } else {
        return Missing.VALUE;
      }
    }
    return current;
  }

  private Document current(String namespace, Object id) {
    MongoCollection<?> collection = backend.resolveDatabase(Utils.getDatabaseNameFromFullName(namespace))
        .resolveCollection(Utils.getCollectionNameFromFullName(namespace), false);
    if (collection == null) {
      return null;
    }
    Iterator<Document> found = collection.handleQuery(new Document("_id", id)).iterator();
    return found.hasNext() ? found.next().cloneDeeply() : null;
  }

  private boolean isOplog(String namespace) {
    return entries.getFullName().equals(namespace);
  }

  // ---- reading: change streams ------------------------------------------------------------

  @Override
  public Cursor createCursor(Document changeStream, String namespace, Aggregation aggregation) {
    Document startAfter = (Document) changeStream.get("startAfter");
    Document resumeAfter = (Document) changeStream.get("resumeAfter");
    BsonTimestamp startAt = (BsonTimestamp) changeStream.get("startAtOperationTime");
    BsonTimestamp trimmed = trimmedThrough;
    Document token = startAfter != null ? startAfter : resumeAfter;
    BsonTimestamp scanFrom;
    String afterKey;
    String mustFind = null;
    if (token != null) {
      ResumeTokens.Data data = ResumeTokens.parse(token);
      if (trimmed != null && data.clusterTime().compareTo(trimmed) <= 0) {
        // As a real server: the entry at the resume point must still be in the oplog.
        throw historyLost();
      }
      if (startAfter == null && data.fromInvalidate()) {
        throw new MongoServerError(260, "InvalidResumeToken", "Attempting to resume a change stream using"
            + " 'resumeAfter' is not allowed from an invalidate notification.");
      }
      scanFrom = data.clusterTime();
      afterKey = data.hex();
      // As a real server: an event's token must be met in this stream before anything after it is
      // returned (else 280); a high-water mark only says where to start.
      mustFind = data.isHighWaterMark() ? null : data.hex();
    } else if (startAt != null) {
      if (trimmed != null && startAt.compareTo(trimmed) <= 0) {
        throw historyLost();
      }
      scanFrom = startAt;
      afterKey = key(ResumeTokens.highWaterMark(startAt)); // before every event at that time
    } else {
      scanFrom = new BsonTimestamp(clock.instant(), increment.get());
      afterKey = key(ResumeTokens.highWaterMark(new BsonTimestamp(scanFrom.getValue() + 1)));
    }
    String fullDocument = String.valueOf(changeStream.getOrDefault("fullDocument", "default"));
    String before = String.valueOf(changeStream.getOrDefault("fullDocumentBeforeChange", "off"));
    ChangeStreamCursor cursor = new ChangeStreamCursor(cursors.generateCursorId(), from -> ops(namespace, from),
        op -> withPreImage(toEvent(op, fullDocument), op, before), aggregation::runStagesAsStream,
        scanFrom, afterKey, mustFind, this::storedThrough, this::trimmedThrough, cursors::remove);
    cursors.add(cursor);
    return cursor;
  }

  /** The UUID of the collection {@code namespace}, as {@code listCollections} reports it; new after a drop. */
  UUID uuidOf(String namespace) {
    return uuids.computeIfAbsent(namespace, n -> UUID.randomUUID());
  }

  static String key(Document token) {
    return (String) token.get("_data");
  }

  /**
   * The operations of {@code namespace} from {@code from} on (inclusive), in stream order: an entry
   * of its own, or one operation of a transaction's {@code applyOps} entry, with its index there
   * and the transaction's session. Read from the position on, lazily: a batch costs what it
   * returns (and the other collections' entries between), not the whole oplog.
   */
  private Stream<Document> ops(String namespace, BsonTimestamp from) {
    return index().tailMap(from, true).values().stream()
        .flatMap(FaithfulOplog::expand)
        .filter(op -> namespace.equals(op.get("ns")));
  }

  private static Stream<Document> expand(Document entry) {
    if (!(entry.get("o") instanceof Document o) || !(o.get("applyOps") instanceof List<?> ops)) {
      return Stream.of(entry);
    }
    List<Document> out = new ArrayList<>(ops.size());
    for (int i = 0; i < ops.size(); i++) {
      Document op = new Document((Document) ops.get(i));
      op.put("ts", entry.get("ts"));
      op.put("wall", entry.get("wall"));
      op.put(TXN_OP_INDEX, i);
      op.put("lsid", entry.get("lsid"));
      op.put("txnNumber", entry.get("txnNumber"));
      out.add(op);
    }
    return out.stream();
  }

  /** The resume token of the event an operation shows as. */
  private static Document tokenOf(Document op) {
    String type = (String) op.get("op");
    Document documentKey = switch (type) {
      case "i" -> new Document("_id", ((Document) op.get("o")).get("_id"));
      case "u" -> (Document) op.get("o2");
      case "d" -> (Document) op.get("o");
      default -> null;
    };
    int index = op.get(TXN_OP_INDEX) instanceof Integer i ? i : 0;
    return ResumeTokens.event(timestamp(op), index, INVALIDATE.equals(type), (UUID) op.get("ui"), documentKey);
  }

  /** Adds {@code fullDocumentBeforeChange} to an update, replace or delete event, as asked. */
  private Document withPreImage(Document event, Document entry, String mode) {
    String op = (String) entry.get("op");
    if ("off".equals(mode) || !("u".equals(op) || "d".equals(op))) {
      return event;
    }
    Object pre = image(entry, PRE_IMAGE);
    if (pre == null && "required".equals(mode)) {
      throw imageNotFound("Change stream was configured to require a pre-image for all update, delete and replace"
          + " events, but the pre-image was not found for event: ", event);
    }
    return event.append("fullDocumentBeforeChange", pre);
  }

  /**
   * What MongoDB 6.0+ answers for a {@code required} image it does not have (expired, or written
   * before images were enabled): error 47, naming the event without its documents.
   */
  private static MongoServerError imageNotFound(String message, Document event) {
    BsonTimestamp ts = (BsonTimestamp) event.get("clusterTime");
    Document ns = (Document) event.get("ns");
    String summary = "{operationType: \"" + event.get("operationType") + "\", ns: {db: \""
        + (ns == null ? "" : ns.get("db")) + "\", coll: \"" + (ns == null ? "" : ns.get("coll")) + "\"}, clusterTime: "
        + (ts == null ? "null" : "Timestamp(" + ts.getTime() + ", " + ts.getInc() + ")") + "}";
    return new MongoServerError(47, "NoMatchingDocument", message + summary);
  }

  private Document toEvent(Document entry, String fullDocument) {
    BsonTimestamp ts = timestamp(entry);
    Document event = new Document("_id", tokenOf(entry));
    String ns = (String) entry.get("ns");
    Document o = (Document) entry.get("o");
    switch ((String) entry.get("op")) {
      case "i" -> event.append("operationType", "insert")
          .append("fullDocument", o)
          .append("documentKey", new Document("_id", o.get("_id")));
      case "d" -> event.append("operationType", "delete").append("documentKey", o);
      case "u" -> {
        Document key = (Document) entry.get("o2");
        if (Boolean.TRUE.equals(entry.get(REPLACE))) {
          event.append("operationType", "replace").append("fullDocument", o).append("documentKey", key);
        } else {
          event.append("operationType", "update").append("documentKey", key)
              .append("updateDescription", entry.get(UPDATE_DESCRIPTION));
          switch (fullDocument) {
            case "updateLookup" -> event.append("fullDocument", current(ns, key.get("_id")));
            case "whenAvailable" -> event.append("fullDocument", image(entry, POST_IMAGE));
            case "required" -> {
              Object post = image(entry, POST_IMAGE);
              if (post == null) {
                throw imageNotFound("Change stream was configured to require a post-image for all update events,"
                    + " but the post-image was not found for event: ", withPlace(event, ts, ns));
              }
              event.append("fullDocument", post);
            }
            default -> { }
          }
        }
      }
      case "c" -> {
        String command = o.keySet().iterator().next();
        return new Document("_id", event.get("_id")).append("operationType", command)
            .append("clusterTime", ts).append("wallTime", entry.get("wall"))
            .append("ns", new Document("db", Utils.getDatabaseNameFromFullName(ns)).append("coll", o.get(command)));
      }
      case INVALIDATE -> {
        return new Document("_id", event.get("_id")).append("operationType", "invalidate")
            .append("clusterTime", ts).append("wallTime", entry.get("wall"));
      }
      default -> throw new IllegalStateException("unknown oplog entry " + entry);
    }
    event.append("clusterTime", ts);
    if (entry.get("txnNumber") != null) {
      // As a real server marks each event of a multi-document transaction.
      event.append("txnNumber", entry.get("txnNumber")).append("lsid", entry.get("lsid"));
    }
    return event.append("wallTime", entry.get("wall"))
        .append("ns", new Document("db", Utils.getDatabaseNameFromFullName(ns))
            .append("coll", Utils.getCollectionNameFromFullName(ns)));
  }

  /** {@code event} with the cluster time and namespace it gets at the end of {@link #toEvent}, for a message. */
  private static Document withPlace(Document event, BsonTimestamp ts, String ns) {
    return new Document(event).append("clusterTime", ts)
        .append("ns", new Document("db", Utils.getDatabaseNameFromFullName(ns))
            .append("coll", Utils.getCollectionNameFromFullName(ns)));
  }

  private static BsonTimestamp timestamp(Document entry) {
    return (BsonTimestamp) entry.get("ts");
  }

  private static MongoServerError historyLost() {
    return new MongoServerError(286, "ChangeStreamHistoryLost",
        "Resume of change stream was not possible, as the resume point may no longer be in the oplog.");
  }

  /**
   * A change stream cursor. Returns nothing more once it returned an invalidate (a real server
   * closes the cursor; the driver then reports no more events either). Like a real server it
   * reports a post-batch resume token with each batch: the last event's token when the batch was
   * cut at its size, otherwise a high-water mark at the point the scan reached, which moves with
   * every write to the server, other collections' included; that is what lets an idle stream
   * advance. Opened at an event's token, it fails with 280 when the stream passes the point where
   * that event would be without meeting it (a token of another collection, or of an event this
   * collection does not have), and until then reports no post-batch token of its own.
   *
   * <p>A failed read ends it, as a real server kills a cursor whose getMore failed: error 136
   * CappedPositionLost once the oplog was trimmed past its position (an entry it had not read yet
   * is gone), or the error of the event that failed (47 for a missing required image). The events
   * before the failure in that batch are not returned, and the cursor's position does not move.
   * Messages carry the prefix a real server gives them ({@code Executor error during getMore ::
   * caused by :: }).
   */
  static final class ChangeStreamCursor extends AbstractCursor {
    private final Function<BsonTimestamp, Stream<Document>> ops;
    private final Function<Document, Document> toEvent;
    private final Function<Stream<Document>, Stream<Document>> pipeline;
    private final Supplier<BsonTimestamp> storedThrough;
    private final Supplier<BsonTimestamp> trimmedThrough;
    private final java.util.function.LongConsumer kill;
    /** Where the next scan starts (inclusive): the time of {@link #afterKey}. */
    private BsonTimestamp scanFrom;
    /** The token (its {@code _data}) of the last event returned or of the last high-water mark. */
    private String afterKey;
    /** The token the stream was opened at, until it is met. */
    private String mustFind;
    private boolean invalidated;
    private boolean firstBatchTaken;
    private Document postBatchToken;

    ChangeStreamCursor(long id, Function<BsonTimestamp, Stream<Document>> ops, Function<Document, Document> toEvent,
        Function<Stream<Document>, Stream<Document>> pipeline, BsonTimestamp scanFrom, String afterKey, String mustFind,
        Supplier<BsonTimestamp> storedThrough, Supplier<BsonTimestamp> trimmedThrough,
        java.util.function.LongConsumer kill) {
      super(id);
      this.ops = ops;
      this.toEvent = toEvent;
      this.pipeline = pipeline;
      this.scanFrom = scanFrom;
      this.afterKey = afterKey;
      this.mustFind = mustFind;
      this.storedThrough = storedThrough;
      this.trimmedThrough = trimmedThrough;
      this.kill = kill;
    }

    @Override
    public boolean isEmpty() {
      return false; // tailable: more may come
    }

    @Override
    public synchronized List<Document> takeDocuments(int numberToReturn) {
      String context = firstBatchTaken ? "Executor error during getMore :: caused by :: "
          : "PlanExecutor error during aggregation :: caused by :: ";
      firstBatchTaken = true;
      if (invalidated) {
        postBatchToken = null;
        return List.of();
      }
      checkPosition(context);
      // Taken before the scan: every entry up to it is stored, so the scan sees all of them.
      BsonTimestamp through = storedThrough.get();
      boolean[] invalidate = {false};
      Stream<Document> events = pipeline.apply(ops.apply(scanFrom)
          .filter(op -> {
            String key = key(tokenOf(op));
            if (mustFind != null) {
              int c = key.compareTo(mustFind);
              if (c > 0) {
                throw new MongoServerError(280, "ChangeStreamFatalError", "cannot resume stream; the resume token"
                    + " was not found. {_data: \"" + key + "\"}");
              }
              if (c == 0) {
                mustFind = null;
              }
              return false;
            }
            return key.compareTo(afterKey) > 0;
          })
          .takeWhile(op -> {
            boolean before = !invalidate[0];
            invalidate[0] |= INVALIDATE.equals(op.get("op"));
            return before;
          })
          .map(toEvent));
      if (numberToReturn > 0) {
        events = events.limit(numberToReturn);
      }
      List<Document> batch;
      try {
        batch = events.collect(Collectors.toList());
      } catch (MongoServerError e) {
        kill.accept(getId());
        throw new MongoServerError(e.getCode(), e.getCodeName(), context + e.getMessageWithoutErrorCode(), e);
      }
      // Entries trimmed while the scan ran may be missing from it: then it is lost, not a batch.
      checkPosition(context);
      invalidated = batch.stream().anyMatch(d -> "invalidate".equals(d.get("operationType")));
      if (!batch.isEmpty()) {
        Document last = (Document) batch.get(batch.size() - 1).get("_id");
        afterKey = key(last);
        scanFrom = ResumeTokens.parse(last).clusterTime();
        postBatchToken = last;
      }
      boolean complete = numberToReturn <= 0 || batch.size() < numberToReturn;
      if (complete && !invalidated && mustFind == null && through != null) {
        // Nothing of this stream up to `through` is left unread: the stream stands there now, and
        // says so with a high-water mark, which sorts before every event at that time. Also when
        // it is where the stream started (opened at the newest entry's time, with nothing of its
        // own since): a real server puts a post-batch token in every reply, the start's high-water
        // mark until its scan passed it.
        Document mark = ResumeTokens.highWaterMark(through);
        if (key(mark).compareTo(afterKey) >= 0) {
          afterKey = key(mark);
          scanFrom = through;
          postBatchToken = mark;
        }
      }
      return batch;
    }

    /** Error 136 if the oplog was trimmed past this cursor's position: an entry it has not read is gone. */
    private void checkPosition(String context) {
      BsonTimestamp trimmed = trimmedThrough.get();
      if (trimmed != null && trimmed.compareTo(scanFrom) > 0) {
        kill.accept(getId());
        throw new MongoServerError(136, "CappedPositionLost", context + "CollectionScan died due to position in"
            + " capped collection being deleted. Last seen record id: RecordId(" + scanFrom.getValue() + ")");
      }
    }

    /** The post-batch resume token of the last batch, or null if it had none. */
    synchronized Document postBatchToken() {
      return postBatchToken;
    }
  }
}
