package dev.sluice.mongodb.feed;

import com.mongodb.MongoChangeStreamException;
import com.mongodb.MongoException;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.MongoChangeStreamCursor;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.UndecodableChange;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiConsumer;
import java.util.concurrent.locks.LockSupport;
import org.bson.BsonDocument;
import org.bson.BsonInvalidOperationException;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.RawBsonDocument;

/** One partition's read position on a collection change stream. Used by one thread. */
final class MongoFeedCursor implements FeedCursor<BsonDocument> {
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(MongoFeedCursor.class);

  private static final int SUMMARY_CHARS = 300;

  private final String stream;
  private final StreamSource source;
  private final PartitionSpec partition;
  private final int batchSize;
  private final long minBackoffNanos;
  private final long maxBackoffNanos;
  private final long serverAwaitNanos;
  private final boolean splitLargeEvents;
  /** Tells whether an update's fullDocument is its post-image or a lookup of the current state. */
  private final FullDocument fullDocument;
  private final MongoChangeFeed.OnInvalidate onInvalidate;
  private String endReason;

  private MongoChangeStreamCursor<RawBsonDocument> driver;
  private StreamStart startedAt;
  private Position position;
  private BsonDocument lastToken;
  /**
   * Whether every change at {@link #lastToken}'s cluster time is read: not after a change's own
   * token (the changes of one transaction share a cluster time, and a batch can end inside it),
   * only once the server answered that it had nothing more (a post-batch token).
   */
  private boolean readThroughLastToken;
  private boolean ended;
  /** The last tryNext found nothing: everything the server had was read. */
  private boolean caughtUp;
  private FeedException failure;
  private final List<BsonDocument> fragments = new ArrayList<>();
  /** Told of every change read, of every partition: the snapshot's window ({@link SnapshotCursor}). */
  private BiConsumer<String, BsonTimestamp> everyChange = (key, time) -> { };

  MongoFeedCursor(CursorSettings settings, StreamSource source, PartitionSpec partition, Position initial) {
    this.stream = settings.stream();
    this.batchSize = settings.batchSize();
    this.minBackoffNanos = settings.minBackoff().toNanos();
    this.maxBackoffNanos = settings.maxBackoff().toNanos();
    this.serverAwaitNanos = settings.serverAwait().toNanos();
    this.splitLargeEvents = settings.splitLargeEvents();
    this.fullDocument = settings.fullDocument();
    this.onInvalidate = settings.onInvalidate();
    this.source = source;
    this.partition = partition;
    this.position = initial;
  }

  void start(StreamStart start) {
    startedAt = start;
    try {
      driver = source.open(start);
    } catch (MongoException e) {
      throw fail(e);
    }
  }

  @Override
  public List<ChangeEvent<BsonDocument>> poll(Duration maxWait) {
    if (failure != null) {
      // A failed cursor keeps failing with the same cause; it never pretends to be idle.
      throw failure;
    }
    List<ChangeEvent<BsonDocument>> out = new ArrayList<>();
    if (ended || driver == null) {
      return out;
    }
    long deadline = System.nanoTime() + Math.max(0, maxWait.toNanos());
    long backoff = minBackoffNanos;
    while (true) {
      RawBsonDocument raw;
      long asked = System.nanoTime();
      try {
        try {
          raw = driver.tryNext();
        } catch (MongoChangeStreamException e) {
          // The driver found an event without a resume token (for example a pipeline stage
          // removed _id): it cannot resume past it.
          throw undecodable("the event has no resume token (_id): " + e.getMessage(), null, e);
        } catch (MongoException e) {
          throw fail(e);
        }
        caughtUp = raw == null;
        if (raw != null) {
          accept(raw, out);
        }
      } catch (FeedException e) {
        // Hand out the changes read before the failure first, so they can be processed and
        // committed; the failure (recorded in `failure`) comes with the next poll, naming the
        // position right after them.
        if (out.isEmpty()) {
          throw e;
        }
        return out;
      }
      if (raw != null) {
        backoff = minBackoffNanos;
        if (ended || out.size() >= batchSize) {
          return out;
        }
        continue;
      }
      advanceToPostBatchToken();
      long now = System.nanoTime();
      long remaining = deadline - now;
      if (!out.isEmpty() || remaining <= 0) {
        return out;
      }
      if (now - asked >= serverAwaitNanos / 2) {
        // The server held the getMore as asked: ask again at once, it waits for us.
        continue;
      }
      // The server answered an idle getMore at once, ignoring maxAwaitTimeMS (the embedded test
      // server does): back off between empty getMores so an idle partition does not spin.
      LockSupport.parkNanos(Math.min(backoff, remaining));
      if (Thread.currentThread().isInterrupted()) {
        return out;
      }
      backoff = Math.min(backoff * 2, maxBackoffNanos);
    }
  }

  private void accept(RawBsonDocument raw, List<ChangeEvent<BsonDocument>> out) {
    BsonDocument event = raw;
    BsonValue token = event.get("_id");
    if (token == null || !token.isDocument()) {
      // Without a resume token there is no position after this change: stop, never skip.
      throw undecodable(
          "the event has no resume token (_id), so the stream cannot move past it", event, null);
    }
    BsonValue split = event.get("splitEvent");
    if (split != null) {
      event = reassemble(event, split);
      if (event == null) {
        return; // more fragments to come; the position stays before the whole event
      }
      token = event.get("_id");
    }
    BsonDocument resumeToken = token.asDocument();
    BsonValue clusterTime = event.get("clusterTime");
    Instant time =
        clusterTime != null && clusterTime.isTimestamp()
            ? Instant.ofEpochSecond(clusterTime.asTimestamp().getTime())
            : null;
    Position eventPosition = StreamStart.after(resumeToken).toPosition(time);
    String eventId = MongoEvents.eventId(resumeToken);
    ChangeEvent<BsonDocument> change;
    try {
      change = decode(event, eventId, eventPosition, time);
    } catch (Malformed | BsonInvalidOperationException | ClassCastException
        | IllegalArgumentException e) {
      // It has a position, so the stream can move past it: hand it to the engine marked
      // undecodable, which parks it (or blocks) through the failure policy. Never dropped.
      change = undecodableChange(event, eventId, eventPosition, time, e.getMessage());
    }
    if (change == null) {
      invalidated(resumeToken, time);
      return;
    }
    everyChange.accept(change.key(),
        clusterTime != null && clusterTime.isTimestamp() ? clusterTime.asTimestamp() : null);
    if (partition.receives(change.key())) {
      out.add(change);
    }
    // Changes of other partitions move the position too: nothing before them is ours.
    position = eventPosition;
    lastToken = resumeToken;
    readThroughLastToken = false;
  }

  /**
   * The collection was dropped, renamed or replaced ({@code $out}): the server ends every stream
   * on it, and only {@code startAfter} the invalidate's token continues. Per the feed's policy the
   * stream ends here (the position stays at the last change, so each restart ends here again and
   * nothing after it is ever skipped unseen), or goes on after it, with that in the position.
   */
  private void invalidated(BsonDocument token, Instant time) {
    Position after = StreamStart.afterInvalidate(token).toPosition(time);
    if (onInvalidate == MongoChangeFeed.OnInvalidate.STOP) {
      endReason = "MongoDB change stream '" + stream + "': the collection was dropped, renamed or replaced"
          + " ($out): the server invalidated the stream after " + position + ". Nothing after that was"
          + " read. To go on with what follows (the collection created again under this name), set"
          + " onInvalidate(START_AFTER) on the feed (service: onInvalidate: start-after) and restart: the"
          + " partition continues after the invalidate. Until then every restart ends here again.";
      ended = true;
      return;
    }
    log.warn("MongoDB change stream '{}': the collection was dropped, renamed or replaced; continuing after"
        + " the invalidate at {} (onInvalidate START_AFTER)", stream, after);
    MongoChangeStreamCursor<RawBsonDocument> old = driver;
    driver = null;
    try {
      old.close();
    } catch (RuntimeException ignored) {
      // the server closed it already
    }
    position = after;
    lastToken = token;
    try {
      driver = source.open(StreamStart.afterInvalidate(token));
    } catch (MongoException e) {
      throw fail(e);
    }
  }

  /** Decodes one complete change; null for {@code invalidate}. */
  private ChangeEvent<BsonDocument> decode(
      BsonDocument event, String eventId, Position eventPosition, Instant time) {
    BsonValue typeValue = event.get("operationType");
    if (typeValue == null || !typeValue.isString()) {
      throw new Malformed("the event has no operationType string");
    }
    String type = typeValue.asString().getValue();
    if ("invalidate".equals(type)) {
      return null;
    }
    if (time == null && event.containsKey("clusterTime")) {
      throw new Malformed("its clusterTime is not a timestamp");
    }
    Operation operation = MongoEvents.operationOf(type);
    BsonValue id = MongoEvents.documentId(event);
    String key;
    if (id != null) {
      key = MongoEvents.keyOf(id);
    } else if (operation == Operation.OTHER) {
      key = ""; // drop, rename, ...: about the collection, so every partition sees it
    } else {
      throw new Malformed(
          "the " + type + " event has no document _id in documentKey or fullDocument");
    }
    BsonValue full = event.get("fullDocument");
    if (full != null && !full.isDocument() && !full.isNull()) {
      throw new Malformed("its fullDocument is a " + full.getBsonType() + ", not a document");
    }
    BsonDocument document = full != null && full.isDocument() ? full.asDocument() : null;
    BsonDocument changedFields = null;
    DocumentState state;
    if (document == null) {
      state = operation == Operation.UPDATE && fullDocument == FullDocument.UPDATE_LOOKUP
          ? DocumentState.CURRENT // looked up, and the document is gone by now
          : DocumentState.NONE;
    } else if (operation == Operation.UPDATE) {
      // updateLookup reads the document when the event is read, which may be many changes later;
      // whenAvailable / required return this change's own post-image.
      state = fullDocument == FullDocument.UPDATE_LOOKUP ? DocumentState.CURRENT : DocumentState.AFTER_CHANGE;
    } else {
      state = DocumentState.AFTER_CHANGE; // insert and replace carry their own document
    }
    if (operation == Operation.UPDATE) {
      BsonValue description = event.get("updateDescription");
      if (description == null || !description.isDocument()
          || !description.asDocument().isDocument("updatedFields")) {
        throw new Malformed("the update event has no updateDescription.updatedFields document");
      }
      changedFields = description.asDocument().getDocument("updatedFields");
    }
    BsonValue beforeValue = event.get("fullDocumentBeforeChange");
    if (beforeValue != null && !beforeValue.isDocument() && !beforeValue.isNull()) {
      throw new Malformed("its fullDocumentBeforeChange is a " + beforeValue.getBsonType() + ", not a document");
    }
    BsonDocument before = beforeValue != null && beforeValue.isDocument() ? beforeValue.asDocument() : null;
    BsonValue documentKey = event.get("documentKey");
    BsonDocument keyDoc =
        documentKey != null
                && documentKey.isDocument()
                && documentKey.asDocument().containsKey("_id")
            ? documentKey.asDocument()
            : id == null ? null : new BsonDocument("_id", id);
    return new ChangeEvent<>(
        eventId,
        stream,
        eventPosition,
        operation,
        key,
        keyDoc,
        document,
        time,
        event,
        state,
        changedFields,
        before);
  }

  private ChangeEvent<BsonDocument> undecodableChange(
      BsonDocument event, String eventId, Position eventPosition, Instant time, String why) {
    String key;
    BsonDocument keyDoc = null;
    try {
      BsonValue id = MongoEvents.documentId(event);
      key = MongoEvents.keyOf(id);
      keyDoc = new BsonDocument("_id", id);
    } catch (RuntimeException noKey) {
      // No usable key: a key of its own, so it blocks no other key when parked; its partition
      // is still chosen deterministically, so exactly one partition receives it.
      key = "undecodable:" + eventId;
    }
    BsonValue type = event.get("operationType");
    Operation operation =
        type != null && type.isString()
            ? MongoEvents.operationOf(type.asString().getValue())
            : Operation.OTHER;
    String reason =
        "MongoDB change stream '" + stream + "': change " + eventId + " at " + eventPosition
            + " cannot be decoded: " + why;
    return new ChangeEvent<>(
        eventId,
        stream,
        eventPosition,
        operation,
        key,
        keyDoc,
        null,
        time,
        new UndecodableChange(reason, event));
  }

  /** A change that has a position but cannot be decoded. */
  private static final class Malformed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Malformed(String message) {
      super(message, null, false, false);
    }
  }

  /** Collects split fragments; returns the merged event after the last one, else null. */
  private BsonDocument reassemble(BsonDocument fragment, BsonValue split) {
    if (!splitLargeEvents) {
      throw undecodable(
          "it is a fragment of a split large event ($changeStreamSplitLargeEvent in the"
              + " pipeline) but splitLargeEvents(true) was not set on the feed, so it cannot be"
              + " reassembled",
          fragment,
          null);
    }
    if (!split.isDocument()
        || !split.asDocument().isNumber("fragment")
        || !split.asDocument().isNumber("of")) {
      throw undecodable("its splitEvent is not {fragment, of}", fragment, null);
    }
    int index = split.asDocument().getNumber("fragment").intValue();
    int of = split.asDocument().getNumber("of").intValue();
    if (index != fragments.size() + 1 || of < index) {
      throw undecodable(
          "split event fragment " + index + " of " + of + " arrived after "
              + fragments.size() + " fragment(s)",
          fragment,
          null);
    }
    fragments.add(fragment);
    if (index < of) {
      return null;
    }
    BsonDocument merged = new BsonDocument();
    for (BsonDocument f : fragments) {
      for (Map.Entry<String, BsonValue> field : f.entrySet()) {
        if (!field.getKey().equals("splitEvent")) {
          // The last fragment's _id wins: resuming after it resumes after the whole event.
          merged.put(field.getKey(), field.getValue());
        }
      }
    }
    fragments.clear();
    return merged;
  }

  private void advanceToPostBatchToken() {
    if (!fragments.isEmpty()) {
      return; // never commit a position inside a split event
    }
    BsonDocument token;
    try {
      token = driver.getResumeToken();
    } catch (MongoException e) {
      return; // only an optimisation; the next change moves the position anyway
    }
    if (token == null) {
      return;
    }
    // The server had nothing more after this token: every change at its cluster time is read.
    readThroughLastToken = true; // it becomes lastToken below if it is not already
    // A real server reports a post-batch resume token when a batch ends, also when no change
    // (of this or any partition) arrived: idle partitions keep their checkpoint fresh. Of a
    // batch without a change of the stream it is a high-water mark, another form than a change's
    // token, which sorts before every change at its time.
    if (!token.equals(lastToken)) {
      lastToken = token;
      // The token's cluster time: the checkpoint's time then says how recent it is (lag, the
      // history window), not the time of the last change that happened to be ours.
      Instant time = MongoEvents.clusterTime(token)
          .filter(t -> position.time() == null || t.isAfter(position.time()))
          .orElse(position.time());
      position = StreamStart.after(token).toPosition(time);
    }
  }

  /** Calls {@code listener} with the key and cluster time of every change read, of any partition. */
  void onEveryChange(BiConsumer<String, BsonTimestamp> listener) {
    this.everyChange = listener;
  }

  /**
   * The stream has read every change with a cluster time before this: just after the cluster time
   * of the last post-batch resume token, or at the time of the last change read (the changes of a
   * transaction share one cluster time, and a batch may end between them: only the server's
   * answer that it has nothing more says that all of them are read, {@code docs/adr/0066}); before
   * either, where it started.
   */
  Optional<BsonTimestamp> readBefore() {
    if (lastToken == null && startedAt.startAtOperationTime() != null) {
      return Optional.of(startedAt.startAtOperationTime());
    }
    BsonDocument token = lastToken != null ? lastToken
        : startedAt.resumeAfter() != null ? startedAt.resumeAfter() : startedAt.startAfter();
    boolean through = lastToken != null && readThroughLastToken;
    return MongoEvents.clusterTimestamp(token).map(t -> through ? new BsonTimestamp(t.getTime(), t.getInc() + 1) : t);
  }

  @Override
  public boolean caughtUp() {
    return caughtUp && fragments.isEmpty();
  }

  private FeedException fail(MongoException e) {
    close();
    failure =
        MongoFeedErrors.translate(
            e,
            stream,
            position,
            splitLargeEvents,
            () -> source.oldestOplogTime().map(ts -> Instant.ofEpochSecond(ts.getTime())).orElse(null));
    return failure;
  }

  private FeedException undecodable(String why, BsonDocument event, Exception cause) {
    close();
    String summary = event == null ? "" : event.toJson();
    if (summary.length() > SUMMARY_CHARS) {
      summary = summary.substring(0, SUMMARY_CHARS) + "...";
    }
    failure =
        new FeedException(
            "MongoDB change stream '"
                + stream
                + "': the change after position "
                + position
                + " cannot be processed: "
                + why
                + ". The cursor stops here so that nothing is skipped silently"
                + (summary.isEmpty() ? "" : "; event: " + summary),
            cause,
            false);
    return failure;
  }

  @Override
  public Position position() {
    return position;
  }

  @Override
  public boolean ended() {
    return ended;
  }

  @Override
  public String endReason() {
    return endReason != null ? endReason : FeedCursor.super.endReason();
  }

  @Override
  public void close() {
    MongoChangeStreamCursor<RawBsonDocument> d = driver;
    driver = null;
    if (d != null) {
      try {
        d.close();
      } catch (RuntimeException ignored) {
        // Closing a broken cursor can fail again; the server reaps it anyway.
      }
    }
  }

  @Override
  public String toString() {
    return "MongoFeedCursor[" + stream + " " + partition + " at " + position + "]";
  }

}
