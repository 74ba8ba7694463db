package dev.sluice.mongodb.feed;

import com.mongodb.MongoException;
import com.mongodb.MongoExecutionTimeoutException;
import com.mongodb.MongoOperationTimeoutException;
import com.mongodb.MongoSocketReadTimeoutException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.UndecodableChange;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.RawBsonDocument;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A partition that reads the existing documents of its collection while it streams, with the
 * watermark algorithm of Netflix's DBLog ({@code docs/adr/0066}). Used by one thread.
 *
 * <p>Chunk after chunk in {@code _id} order:
 * <ol>
 *   <li>the chunk is read, with its watermarks ({@link SnapshotChunk}): every change before the
 *       low one is in the read, none after the high one. A snapshot read is at one cluster time, so
 *       nothing is in doubt; otherwise a document changed between the two may have been read before
 *       or after that change. The change stream starts at the first read's low watermark;
 *   <li>the stream is read up to the high watermark; its changes are handed out in order as they
 *       are read, poll after poll (a lagging stream is not read into memory first), and the keys of
 *       the chunk changed from the low watermark on are noted;
 *   <li>the chunk's documents are handed out as {@link Operation#SNAPSHOT} changes, except those
 *       changed between the watermarks (the stream has delivered, or will deliver, that change and
 *       every later one, each with its document); then the stream's changes after the window.
 * </ol>
 * What the cursor holds is bounded by the chunk and one batch ({@link #held()}), however far
 * behind the stream is ({@code docs/adr/0086}).
 * A document whose state the stream has already handed out since it opened is not handed out
 * again. Every document read is handed out at a point of the stream where it is current: no
 * document goes back to an older state, and no state is delivered twice (beyond the redelivery of
 * what was not yet committed after a restart, and {@code updateLookup}, whose document is the one
 * current when the change is read). Each position names the stream's position and the last
 * {@code _id} handed out ({@link SnapshotProgress}), so a restart goes on from the last committed
 * document, not from the first. Once a read returns less than a chunk, the partition only streams.
 */
final class SnapshotCursor implements FeedCursor<BsonDocument> {
  private static final Logger LOG = LoggerFactory.getLogger(SnapshotCursor.class);
  private static final long PROGRESS_LOG_NANOS = Duration.ofSeconds(10).toNanos();
  /** How long the stream may stand still before it reached a chunk's high watermark. */
  private static final Duration WINDOW_PATIENCE = Duration.ofSeconds(30);
  private static final Duration WINDOW_POLL = Duration.ofMillis(100);
  /** A snapshot read's error codes that retrying cures (docs/adr/0085). */
  static final int SNAPSHOT_TOO_OLD = 239;
  static final int SNAPSHOT_UNAVAILABLE = 246;
  /** Polls of a stream that is behind before the next chunk is read anyway. */
  private static final int MAX_CATCH_UP_POLLS = 10;

  /** One thing to hand out: a change, or only a position (a document of another partition). */
  private record Out(Position position, ChangeEvent<BsonDocument> change) {}

  /**
   * A chunk read whose window the stream has not passed yet. The stream's changes up to the window's
   * end are handed out as they are read (not held: a lagging stream may have any number of them);
   * only the chunk's documents, and the changes read after the window's end in the poll that found
   * it, wait here.
   */
  private static final class Pending {
    final List<RawBsonDocument> documents;
    /** The keys of {@link #documents}, to tell which changes in the window concern the chunk. */
    final Set<String> keys;
    final BsonTimestamp low;
    final BsonTimestamp high;
    final boolean last;
    /** Where the documents go: the stream position before the first change after the window. */
    Position rowsAt;
    final List<ChangeEvent<BsonDocument>> later = new ArrayList<>();
    /** When the stream last moved while reading the window. */
    long lastMoved = System.nanoTime();

    Pending(List<RawBsonDocument> documents, BsonTimestamp low, BsonTimestamp high, boolean last, Position rowsAt) {
      this.documents = documents;
      this.keys = new HashSet<>(documents.size() * 2);
      documents.forEach(d -> keys.add(MongoEvents.keyOf(d.get("_id"))));
      this.low = low;
      this.high = high;
      this.last = last;
      this.rowsAt = rowsAt;
    }
  }

  private final CursorSettings settings;
  private final StreamSource source;
  private final PartitionSpec partition;
  /** How many documents the next read asks for: the configured chunk size, less after a timeout. */
  private final ChunkSizing sizing;
  private final SnapshotScope scope;
  /** Opened at the first read's low watermark, or at the position resumed from. */
  private MongoFeedCursor stream;
  private final ArrayDeque<Out> buffered = new ArrayDeque<>();
  /** The last {@code _id} read (the chunks so far are buffered or handed out). */
  private BsonValue after;
  /** The last chunk was read: once {@link #buffered} is handed out, the partition only streams. */
  private boolean done;
  private Position position;
  private FeedException failure;
  private long documentsRead;
  /** Catch-up polls since the last chunk was read. */
  private int catchUpPolls;
  private long documentsLeftToStream;
  private long lastProgressLog = System.nanoTime();
  /** The window of the chunk being read, filled by the stream as it reads. */
  private BsonTimestamp windowLow;
  private BsonTimestamp windowHigh;
  /** Keys of the pending chunk changed in its window: at most a chunk's keys. */
  private final Set<String> changedInWindow = new HashSet<>();
  private boolean pastWindow;
  /** The chunk read and not handed out yet: its documents wait until the stream passed its window. */
  private Pending pending;
  /** The most documents and changes this cursor held at once ({@link #held()}). */
  private int mostHeld;
  /**
   * Keys of this partition whose state the stream has handed out since it was opened (a change
   * that carries the document, or a delete): a later read of such a document would only repeat
   * that state, or one the stream hands out after it. A key leaves when its chunk is read;
   * bounded by {@link #DELIVERED_LIMIT}, past which it is cleared (the reads may then repeat
   * states, never go back).
   */
  private final Set<String> delivered = new HashSet<>();
  private static final int DELIVERED_LIMIT = 100_000;

  /**
   * @param start where the snapshot stands
   * @param streamPosition the position of {@code start}'s stream part
   */
  SnapshotCursor(CursorSettings settings, StreamSource source, PartitionSpec partition, SnapshotProgress start,
      Position streamPosition, ChunkSizing sizing) {
    this(settings, source, partition, start, streamPosition, null, sizing);
  }

  /**
   * A snapshot that goes on with a stream already open at {@code start}'s stream position (a
   * re-snapshot on request, started by the stream's partition).
   */
  SnapshotCursor(CursorSettings settings, StreamSource source, PartitionSpec partition, SnapshotProgress start,
      Position streamPosition, MongoFeedCursor openStream, ChunkSizing sizing) {
    this.settings = settings;
    this.source = source;
    this.partition = partition;
    this.sizing = sizing;
    this.scope = start.scope();
    this.after = start.after();
    if (start.stream() == null) {
      this.position = SnapshotProgress.NOT_STARTED;
    } else {
      this.position = start.after() == null ? SnapshotProgress.atStart(streamPosition, scope)
          : SnapshotProgress.after(streamPosition, scope).apply(start.after());
      if (openStream != null) {
        openStream.onEveryChange(this::seen);
        stream = openStream;
      } else {
        openStream(start.stream(), streamPosition);
      }
    }
  }

  private void openStream(StreamStart start, Position at) {
    MongoFeedCursor opened = new MongoFeedCursor(settings, source, partition, at);
    opened.onEveryChange(this::seen);
    opened.start(start);
    stream = opened;
  }

  private void seen(String key, BsonTimestamp time) {
    if (windowHigh == null || time == null) {
      return;
    }
    if (time.compareTo(windowHigh) > 0) {
      pastWindow = true;
    } else if (time.compareTo(windowLow) >= 0 && pending != null && pending.keys.contains(key)) {
      changedInWindow.add(key);
    }
  }

  @Override
  public List<ChangeEvent<BsonDocument>> poll(Duration maxWait) {
    if (failure != null) {
      throw failure;
    }
    if (buffered.isEmpty()) {
      if (done) {
        return stream.poll(maxWait);
      }
      try {
        if (pending == null) {
          if (stream != null && !stream.caughtUp() && !stream.ended() && catchUpPolls < MAX_CATCH_UP_POLLS) {
            // A stream behind the source (a restart after a pause, a re-snapshot requested while
            // lagging) first catches up: a chunk's window then holds seconds of changes, not the
            // backlog. Without waiting: a stream that has nothing more is caught up, and the chunk is
            // read. Under writes that never let it catch up quite, the chunk is read after a few
            // batches anyway, so that the snapshot goes on.
            catchUpPolls++;
            return catchUp();
          }
          catchUpPolls = 0;
          readNextChunk();
        }
        if (pending != null) {
          List<ChangeEvent<BsonDocument>> window = readWindow(maxWait);
          if (!window.isEmpty() || pending != null) {
            return window;
          }
        }
      } catch (MongoException e) {
        throw fail(e);
      } catch (FeedException e) {
        failure = e;
        throw e;
      }
    }
    List<ChangeEvent<BsonDocument>> out = new ArrayList<>();
    while (!buffered.isEmpty() && out.size() < settings.batchSize()) {
      Out next = buffered.poll();
      position = next.position();
      if (next.change() != null) {
        out.add(next.change());
      }
    }
    return out;
  }

  /**
   * How many documents and changes this cursor holds in memory: the documents of the chunk read and
   * not handed out yet, and the changes read after its window's end. At most the chunk size plus
   * one batch, however far the stream lags ({@code docs/adr/0086}).
   */
  int held() {
    return buffered.size() + (pending == null ? 0 : pending.documents.size() + pending.later.size());
  }

  /** The most {@link #held()} was, after any poll of this cursor. */
  int mostHeld() {
    return Math.max(mostHeld, held());
  }

  private List<ChangeEvent<BsonDocument>> catchUp() {
    List<ChangeEvent<BsonDocument>> read = stream.poll(Duration.ZERO);
    Function<Position, Position> withProgress = progress(after);
    List<ChangeEvent<BsonDocument>> out = new ArrayList<>(read.size());
    for (ChangeEvent<BsonDocument> change : read) {
      noteDelivered(change);
      out.add(change.at(withProgress.apply(change.position())));
    }
    position = withProgress.apply(stream.position());
    return out;
  }

  private void readNextChunk() {
    int limit = sizing.current();
    long started = System.nanoTime();
    SnapshotChunk chunk;
    try {
      chunk = source.readChunk(after, scope, limit);
    } catch (MongoException e) {
      if (e.getCode() == SNAPSHOT_UNAVAILABLE) {
        // Transient: the server cannot read at a snapshot yet after a change of the collection's
        // catalog entry, which a snapshot session cannot see (a collMod, such as the one that
        // enables images, an index build). Retried with the engine's back-off.
        throw new FeedException("MongoDB change stream '" + settings.stream() + "' " + partition + ": the snapshot"
            + " read of a chunk" + (after == null ? "" : " after _id " + SnapshotProgress.shown(after)) + " found no"
            + " snapshot available (246 SnapshotUnavailable: the collection was changed, by a collMod or an index"
            + " build, after the time a snapshot read would use); retrying with back-off: " + e.getMessage(), e, true);
      }
      if (e.getCode() == SNAPSHOT_TOO_OLD) {
        // The read outlived the server's snapshot history: a new session reads at a new time, and
        // a smaller read finishes sooner.
        int next = sizing.timedOut(limit);
        throw new FeedException("MongoDB change stream '" + settings.stream() + "' " + partition + ": a snapshot"
            + " chunk of " + limit + " documents" + (after == null ? "" : " after _id " + SnapshotProgress.shown(after))
            + " took longer than the server keeps snapshot history (239 SnapshotTooOld:"
            + " minSnapshotHistoryWindowInSeconds, 300 s by default); it is read again at a new snapshot time with "
            + next + " documents at most: " + e.getMessage(), e, true);
      }
      if (!timedOut(e)) {
        throw e;
      }
      int next = sizing.timedOut(limit);
      throw new FeedException("MongoDB change stream '" + settings.stream() + "' " + partition + ": reading a snapshot"
          + " chunk of " + limit + " documents" + (after == null ? "" : " after _id " + SnapshotProgress.shown(after))
          + " timed out (a round trip took longer than " + roundTripBound() + ": large documents or a busy server);"
          + " the chunk is read again with " + next + " documents at most, and the size grows back to "
          + sizing.configured() + " while reads are fast: " + e.getMessage(), e, true);
    }
    sizing.read(limit, Duration.ofNanos(System.nanoTime() - started));
    List<RawBsonDocument> documents = chunk.documents();
    BsonTimestamp low = chunk.low();
    BsonTimestamp high = chunk.high();
    boolean last = documents.size() < limit;
    if (stream == null) {
      StreamStart start = StreamStart.at(low);
      openStream(start, start.toPosition(Instant.ofEpochSecond(Integer.toUnsignedLong(low.getTime()))));
    }
    pending = new Pending(documents, low, high, last, stream.position());
    mostHeld = Math.max(mostHeld, held());
    if (high == null) {
      handOutChunk(); // never written to: no change can concern the chunk
      return;
    }
    windowLow = low;
    windowHigh = high;
    changedInWindow.clear();
    pastWindow = false;
  }

  /**
   * Reads the stream on towards the pending chunk's high watermark: the changes up to it are handed
   * out at once, and the keys changed from the low one on noted. Once the stream passed it, the
   * chunk's documents follow, then what the stream read after it.
   */
  private List<ChangeEvent<BsonDocument>> readWindow(Duration maxWait) {
    Pending p = pending;
    Function<Position, Position> withPrevious = progress(after);
    List<ChangeEvent<BsonDocument>> out = new ArrayList<>();
    if (!windowPassed()) {
      Position was = stream.position();
      List<ChangeEvent<BsonDocument>> read =
          stream.poll(maxWait.compareTo(WINDOW_POLL) < 0 ? maxWait : WINDOW_POLL);
      for (ChangeEvent<BsonDocument> change : read) {
        Optional<BsonTimestamp> time = clusterTime(change);
        if (p.later.isEmpty() && time.isPresent() && time.get().compareTo(p.high) <= 0) {
          // The documents go at the stream position before the first change after the window.
          out.add(change.at(withPrevious.apply(change.position())));
          p.rowsAt = change.position();
          noteDelivered(change);
        } else {
          p.later.add(change);
        }
      }
      if (p.later.isEmpty() && !pastWindow) {
        p.rowsAt = stream.position(); // also past changes of other partitions, and batch ends
      }
      long now = System.nanoTime();
      if (!read.isEmpty() || !stream.position().equals(was)) {
        p.lastMoved = now;
      } else if (!windowPassed() && now - p.lastMoved > WINDOW_PATIENCE.toNanos()) {
        throw new FeedException("MongoDB change stream '" + settings.stream() + "' " + partition + ": the"
            + " snapshot's stream did not move for " + WINDOW_PATIENCE + " before reaching " + p.high + " (the newest"
            + " operation time after reading a chunk; the stream stands at " + stream.position()
            + " and has read every change before " + stream.readBefore().orElse(null) + "); the chunk is read again",
            null, true);
      }
    }
    if (!out.isEmpty()) {
      position = out.get(out.size() - 1).position();
    }
    mostHeld = Math.max(mostHeld, held());
    if (windowPassed()) {
      handOutChunk();
    } else {
      position = withPrevious.apply(p.rowsAt);
    }
    return out;
  }

  /** The stream passed the pending chunk's window (a stream that ended reaches nothing more). */
  private boolean windowPassed() {
    BsonTimestamp high = pending.high;
    return pastWindow || stream.ended() || stream.readBefore().map(t -> t.compareTo(high) > 0).orElse(false);
  }

  /** In stream order: the documents of the pending chunk, then the changes read after its window. */
  private void handOutChunk() {
    Pending p = pending;
    pending = null;
    windowHigh = null;
    List<RawBsonDocument> documents = p.documents;
    Function<BsonValue, Position> rowPositions = SnapshotProgress.after(p.rowsAt, scope);
    Instant readAt = Instant.ofEpochSecond(Integer.toUnsignedLong(p.low.getTime()));
    for (RawBsonDocument document : documents) {
      BsonValue id = document.get("_id");
      String key = MongoEvents.keyOf(id);
      Position at = rowPositions.apply(id);
      boolean mine = partition.owns(key);
      boolean streamed = changedInWindow.contains(key) || delivered.remove(key);
      if (mine && streamed) {
        documentsLeftToStream++;
      }
      buffered.add(new Out(at, mine && !streamed
          ? new ChangeEvent<>(snapshotId(id, document), settings.stream(), at, Operation.SNAPSHOT, key,
              new BsonDocument("_id", id), document, readAt, document)
          : null));
    }
    changedInWindow.clear();
    if (!documents.isEmpty()) {
      after = documents.get(documents.size() - 1).get("_id");
    }
    boolean last = p.last;
    done = last;
    Function<Position, Position> withLast = last ? q -> q : progress(after);
    p.later.forEach(c -> buffered.add(at(withLast.apply(c.position()), c)));
    p.later.forEach(this::noteDelivered);
    if (last) {
      delivered.clear();
    }
    if (last && p.later.isEmpty()) {
      buffered.add(new Out(p.rowsAt, null)); // a plain stream position: the snapshot is complete
    }
    documentsRead += documents.size();
    long now = System.nanoTime();
    if (last || now - lastProgressLog >= PROGRESS_LOG_NANOS) {
      lastProgressLog = now;
      LOG.info("Snapshot of '{}' {} ({}): {} documents read in this run{}, {} of them left to changes made while"
          + " they were read{}", settings.stream(), partition, scope, documentsRead,
          after == null ? "" : ", up to _id " + SnapshotProgress.shown(after), documentsLeftToStream,
          last ? "; the snapshot is complete" : "");
    }
  }

  /**
   * A round trip of a chunk read ran out of time: the driver's own bound (timeoutMS, which a read
   * has per round trip), the server's (50 MaxTimeMSExpired), or the socket's read timeout.
   */
  static boolean timedOut(MongoException e) {
    return e instanceof MongoOperationTimeoutException || e instanceof MongoExecutionTimeoutException
        || e instanceof MongoSocketReadTimeoutException || e.getCode() == 50
        || e.getCause() instanceof MongoException cause && cause != e && timedOut(cause);
  }

  private String roundTripBound() {
    Duration bound = sizing.roundTripBound();
    return bound == null ? "the client's timeout" : bound.toString();
  }

  /**
   * A change of the stream at {@code position}, the snapshot's: the engine commits a change's own
   * position, which must keep the snapshot's progress while the snapshot is not complete.
   */
  private static Out at(Position position, ChangeEvent<BsonDocument> c) {
    return new Out(position, c.at(position));
  }

  private void noteDelivered(ChangeEvent<BsonDocument> change) {
    boolean carriesState = change.operation() == Operation.DELETE
        || (change.document() != null && change.operation() != Operation.OTHER);
    if (!carriesState || change.raw() instanceof UndecodableChange) {
      return;
    }
    if (delivered.size() >= DELIVERED_LIMIT) {
      delivered.clear();
    }
    delivered.add(change.key());
  }

  /** Positions of the snapshot with {@code after} as its last document. */
  private Function<Position, Position> progress(BsonValue after) {
    return after == null ? p -> SnapshotProgress.atStart(p, scope) : p -> SnapshotProgress.after(p, scope).apply(after);
  }

  /**
   * The document's {@code _id} and a digest of its content: a re-read of the same state has the
   * same id, whatever the stream position it was read at, and a different state another.
   */
  private static String snapshotId(BsonValue id, RawBsonDocument document) {
    java.nio.ByteBuffer bytes = document.getByteBuffer().asNIO();
    byte[] digest;
    try {
      java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
      sha.update(bytes);
      digest = sha.digest();
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is required of every Java platform", e);
    }
    return "snapshot:" + SnapshotProgress.valueJson(id) + ":" + java.util.HexFormat.of().formatHex(digest, 0, 16);
  }

  private static Optional<BsonTimestamp> clusterTime(ChangeEvent<BsonDocument> change) {
    Object raw = change.raw() instanceof UndecodableChange u ? u.source() : change.raw();
    if (raw instanceof BsonDocument event && event.get("clusterTime") instanceof org.bson.BsonTimestamp ts) {
      return Optional.of(ts);
    }
    return Optional.empty();
  }

  private FeedException fail(MongoException e) {
    failure = MongoFeedErrors.translate(e, settings.stream(), position, false,
        () -> source.oldestOplogTime().map(ts -> Instant.ofEpochSecond(ts.getTime())).orElse(null));
    return failure;
  }

  @Override
  public Position position() {
    return streaming() ? stream.position() : position;
  }

  /** The snapshot is read and handed out: the partition only streams. */
  boolean streaming() {
    return done && buffered.isEmpty();
  }

  /** The last chunk has been read (what it holds may not all be handed out yet). */
  boolean lastChunkRead() {
    return done;
  }

  SnapshotScope scope() {
    return scope;
  }

  /** The stream this snapshot reads along, once the snapshot is {@linkplain #streaming() over}. */
  MongoFeedCursor stream() {
    if (!streaming()) {
      throw new IllegalStateException("the snapshot is not complete");
    }
    return stream;
  }

  @Override
  public boolean caughtUp() {
    return streaming() && stream.caughtUp();
  }

  @Override
  public boolean ended() {
    return streaming() && stream.ended();
  }

  @Override
  public String endReason() {
    return stream != null ? stream.endReason() : FeedCursor.super.endReason();
  }

  @Override
  public void close() {
    if (stream != null) {
      stream.close();
    }
  }

  @Override
  public String toString() {
    return "SnapshotCursor[" + settings.stream() + " " + partition + " at " + position() + "]";
  }
}
