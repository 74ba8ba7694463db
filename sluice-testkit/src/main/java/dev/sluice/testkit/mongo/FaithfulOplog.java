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
import de.bwaldvogel.mongo.oplog.OplogPosition;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.HashMap;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
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
 *       retained history then fails with error 286 (ChangeStreamHistoryLost), as on a real server,
 *       and an open cursor whose next entry was deleted answers its next getMore with error 136
 *       (CappedPositionLost) and is closed, as a real server's oplog scan dies when the capped
 *       oplog overwrote its position.
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

  /**
   * A resume token as a real server writes it: {@code _data} is the hex of a KeyString whose first
   * value is the cluster time (type byte {@code 82}, then the 8-byte timestamp, big-endian). The
   * rest of a real token (UUID, document key) is left out: nothing here reads it.
   */
  static Document token(BsonTimestamp ts) {
    return new Document("_data", String.format("82%016X", ts.getValue()));
  }

  static BsonTimestamp timestampOf(Document token) {
    String data = (String) token.get("_data");
    if (data == null || data.length() < 18 || !data.startsWith("82")) {
      throw new MongoServerError(260, "InvalidResumeToken", "Unsupported resume token: " + token);
    }
    return new BsonTimestamp(Long.parseUnsignedLong(data.substring(2, 18), 16));
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
    OplogPosition start;
    BsonTimestamp from;
    if (token != null) {
      BsonTimestamp after = timestampOf(token);
      if (trimmed != null && after.compareTo(trimmed) < 0) {
        throw historyLost();
      }
      if (startAfter == null && isInvalidate(after, namespace)) {
        throw new MongoServerError(260, "InvalidResumeToken", "Attempting to resume a change stream using"
            + " 'resumeAfter' is not allowed from an invalidate notification.");
      }
      start = new OplogPosition(after);
      from = after;
    } else if (startAt != null) {
      if (trimmed != null && startAt.compareTo(trimmed) <= 0) {
        throw historyLost();
      }
      start = new OplogPosition(startAt).inclusive();
      from = startAt;
    } else {
      from = new BsonTimestamp(clock.instant(), increment.get());
      start = new OplogPosition(from);
    }
    String fullDocument = String.valueOf(changeStream.getOrDefault("fullDocument", "default"));
    String before = String.valueOf(changeStream.getOrDefault("fullDocumentBeforeChange", "off"));
    ChangeStreamCursor cursor = new ChangeStreamCursor(cursors.generateCursorId(),
        (position, at) -> aggregation.runStagesAsStream(stream(namespace, position, at, fullDocument, before)), start,
        from, this::storedThrough, this::trimmedThrough, cursors::remove);
    cursors.add(cursor);
    return cursor;
  }

  private boolean isInvalidate(BsonTimestamp at, String namespace) {
    Document e = index().get(at);
    return e != null && INVALIDATE.equals(e.get("op")) && namespace.equals(e.get("ns"));
  }

  /** The events of {@code namespace} after {@code position}, which stands at {@code at}. */
  private Stream<Document> stream(String namespace, OplogPosition position, BsonTimestamp at, String fullDocument,
      String preImages) {
    // Only this collection's entries; nothing after its invalidate (a real server closes the cursor).
    // Read from the position on, in timestamp order, lazily: a batch costs what it returns (and the
    // other collections' entries between), not the whole oplog.
    boolean[] invalidated = {false};
    return index().tailMap(at, true).values().stream()
        .filter(e -> namespace.equals(e.get("ns")))
        .filter(e -> new OplogPosition(timestamp(e)).isAfter(position))
        .takeWhile(e -> {
          boolean before = !invalidated[0];
          invalidated[0] |= INVALIDATE.equals(e.get("op"));
          return before;
        })
        .map(e -> withPreImage(toEvent(e, fullDocument), e, preImages));
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
    Document event = new Document("_id", token(ts));
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
    return event.append("clusterTime", ts)
        .append("wallTime", entry.get("wall"))
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
   * cut at its size, otherwise the point the scan reached, which moves with every write to the
   * server, other collections' included; that is what lets an idle stream advance.
   *
   * <p>A failed read ends it, as a real server kills a cursor whose getMore failed: error 136
   * CappedPositionLost once the oplog was trimmed past its position (an entry it had not read yet
   * is gone), or the error of the event that failed (47 for a missing required image). The events
   * before the failure in that batch are not returned, and the cursor's position does not move.
   * Messages carry the prefix a real server gives them ({@code Executor error during getMore ::
   * caused by :: }).
   */
  static final class ChangeStreamCursor extends AbstractCursor {
    private final BiFunction<OplogPosition, BsonTimestamp, Stream<Document>> stream;
    private final Supplier<BsonTimestamp> storedThrough;
    private final Supplier<BsonTimestamp> trimmedThrough;
    private final java.util.function.LongConsumer kill;
    private OplogPosition position;
    /** The timestamp {@link #position} stands at. */
    private BsonTimestamp positionTime;
    private boolean invalidated;
    private boolean firstBatchTaken;
    private Document postBatchToken;

    ChangeStreamCursor(long id, BiFunction<OplogPosition, BsonTimestamp, Stream<Document>> stream, OplogPosition start,
        BsonTimestamp startTime, Supplier<BsonTimestamp> storedThrough, Supplier<BsonTimestamp> trimmedThrough,
        java.util.function.LongConsumer kill) {
      super(id);
      this.stream = stream;
      this.position = start;
      this.positionTime = startTime;
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
      Stream<Document> events = stream.apply(position, positionTime);
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
        positionTime = timestampOf(last);
        position = new OplogPosition(positionTime);
        postBatchToken = last;
      }
      boolean complete = numberToReturn <= 0 || batch.size() < numberToReturn;
      if (complete && !invalidated && through != null && new OplogPosition(through).isAfter(position)) {
        // Nothing of this stream up to `through` is left unread: the stream stands there now.
        position = new OplogPosition(through);
        positionTime = through;
        postBatchToken = token(through);
      }
      return batch;
    }

    /** Error 136 if the oplog was trimmed past this cursor's position: an entry it has not read is gone. */
    private void checkPosition(String context) {
      BsonTimestamp trimmed = trimmedThrough.get();
      if (trimmed != null && new OplogPosition(trimmed).isAfter(position)) {
        kill.accept(getId());
        throw new MongoServerError(136, "CappedPositionLost", context + "CollectionScan died due to position in"
            + " capped collection being deleted. Last seen record id: RecordId(" + positionTime.getValue() + ")");
      }
    }

    /** The post-batch resume token of the last batch, or null if it had none. */
    synchronized Document postBatchToken() {
      return postBatchToken;
    }
  }
}
