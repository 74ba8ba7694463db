package dev.sluice.mongodb.feed;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.BooleanSupplier;
import org.bson.BsonDocument;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A partition's cursor of a consumer group's feed, which takes up the group's re-snapshot requests
 * ({@link SnapshotRequests}, {@code docs/adr/0067}) between polls. While it only streams, it looks
 * for a request its partition has not done (at most once per check interval); it then goes on with
 * a {@link SnapshotCursor} over the same open stream, scoped to the request's range, which re-reads
 * the partition's documents chunk by chunk while the stream's changes keep flowing. Once the last
 * chunk is read, the request is marked done for the partition, and the next one is looked for.
 *
 * <p>A restart in the middle resumes from the committed position, which names the request and the
 * last {@code _id} handed out ({@link SnapshotProgress}): the re-snapshot goes on from there, not
 * from its first document. Marking done before the rest of the last chunk is committed is safe for
 * the same reason; a crash after the last chunk's position was committed and before the mark was
 * written re-reads the request once more (at least once, never less). Used by one thread.
 */
final class RequestedSnapshotCursor implements FeedCursor<BsonDocument> {
  private static final Logger LOG = LoggerFactory.getLogger(RequestedSnapshotCursor.class);

  private final CursorSettings settings;
  private final StreamSource source;
  private final PartitionSpec partition;
  private final SnapshotRequests requests;
  private final ChunkSizing sizing;
  private final long intervalNanos;
  /**
   * A {@link MongoFeedCursor} or a partition's cursor on the shared reader (streaming), or a
   * {@link SnapshotCursor} (a bootstrap, a repair or a request).
   */
  private FeedCursor<BsonDocument> current;
  /** Opens a stream cursor of the partition's own: a snapshot's window needs every change it reads. */
  private final BiFunction<PartitionSpec, Position, MongoFeedCursor> openOwn;
  private long nextCheck;
  /** The current snapshot's request is recorded as done for this partition. */
  private boolean marked;
  /** When a mark that failed is tried again. */
  private long nextMark;

  RequestedSnapshotCursor(CursorSettings settings, StreamSource source, PartitionSpec partition,
      SnapshotRequests requests, Duration interval, FeedCursor<BsonDocument> opened,
      BiFunction<PartitionSpec, Position, MongoFeedCursor> openOwn, ChunkSizing sizing) {
    this.openOwn = openOwn;
    this.sizing = sizing;
    this.settings = settings;
    this.source = source;
    this.partition = partition;
    this.requests = requests;
    this.intervalNanos = interval.toNanos();
    this.current = opened;
    this.nextCheck = System.nanoTime();
    this.nextMark = nextCheck;
  }

  @Override
  public List<ChangeEvent<BsonDocument>> poll(Duration maxWait) {
    markDone();
    FeedCursor<BsonDocument> streaming = streaming();
    if (streaming != null && !streaming.ended() && System.nanoTime() - nextCheck >= 0) {
      nextCheck = System.nanoTime() + intervalNanos;
      requests.next(partition).ifPresent(r -> start(streaming, r));
    }
    List<ChangeEvent<BsonDocument>> out = current.poll(maxWait);
    markDone();
    return out;
  }

  /** The stream, when the partition only streams (no snapshot under way); else null. */
  private FeedCursor<BsonDocument> streaming() {
    if (!(current instanceof SnapshotCursor snapshot)) {
      return current;
    }
    return snapshot.streaming() && (snapshot.scope().request() == null || marked) ? snapshot.stream() : null;
  }

  private void start(FeedCursor<BsonDocument> streaming, SnapshotRequests.Pending pending) {
    SnapshotRequest r = pending.request();
    SnapshotScope scope = new SnapshotScope(r.fromId(), r.toId(), pending.id());
    Position at = streaming.position();
    MongoFeedCursor stream;
    if (streaming instanceof MongoFeedCursor own) {
      stream = own;
    } else {
      // Reading through the shared reader: the snapshot's window must see every change of the
      // stream as it reads it, so the partition goes on with a cursor of its own from here.
      streaming.close();
      stream = openOwn.apply(partition, at);
    }
    current = new SnapshotCursor(settings, source, partition,
        new SnapshotProgress(StreamStart.fromPosition(at), null, scope), at, stream, sizing);
    marked = false;
    LOG.info("Re-snapshot of '{}' {} for group '{}' starts at {}: {}", settings.stream(), partition, r.group(), at,
        scope);
  }

  private void markDone() {
    if (!marked && current instanceof SnapshotCursor snapshot && snapshot.scope().request() != null
        && snapshot.lastChunkRead() && System.nanoTime() - nextMark >= 0) {
      marked = requests.markDone(snapshot.scope().request(), partition);
      nextMark = System.nanoTime() + intervalNanos;
    }
  }

  @Override
  public Position position() {
    return current.position();
  }

  @Override
  public void acknowledge(Position committed) {
    current.acknowledge(committed);
  }

  @Override
  public boolean caughtUp() {
    return current.caughtUp();
  }

  @Override
  public boolean ended() {
    return current.ended();
  }

  /** As the cursor it starts with (a partition's cursor on the shared reader parks); a snapshot never does. */
  @Override
  public boolean wakeInsteadOfWaiting(Runnable wake, BooleanSupplier waitingForThread) {
    return current.wakeInsteadOfWaiting(wake, waitingForThread);
  }

  @Override
  public boolean parked() {
    return current.parked();
  }

  /** Reading the group's requests, or recording this partition's done, failing and tried again. */
  @Override
  public String sideFailure() {
    String requestsFailing = requests.failure();
    return requestsFailing != null ? requestsFailing : current.sideFailure();
  }

  @Override
  public String endReason() {
    return current.endReason();
  }

  @Override
  public void close() {
    current.close();
  }

  @Override
  public String toString() {
    return current.toString();
  }
}
