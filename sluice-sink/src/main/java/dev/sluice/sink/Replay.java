package dev.sluice.sink;

import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.function.Function;

/**
 * Re-publishes history to a separate destination (an event replay) without touching
 * any listener's lease or checkpoint: it opens its own cursor on the feed, or reads the current
 * documents, and runs a handler (typically a sink built for a replay topic or exchange) over
 * them, flushing every {@code flushEvery} changes and at the end. The API behind the CLI's
 * {@code replay} command.
 *
 * <p>The handler receives the fence {@code replay:<stream>} with epoch 0, so consumers can tell
 * replayed messages from live ones by the {@code sluice-fence-epoch} header.
 */
public final class Replay {

  /**
   * What a replay did.
   *
   * @param changes changes handed to the handler
   * @param last the position of the last change handed over, or null if none
   */
  public record Result(long changes, Position last) {}

  /** Told after every batch of a replay: how many changes so far, and the last one's position. */
  @FunctionalInterface
  public interface Progress {
    void progress(long changes, Position last);
  }

  private Replay() {}

  /** The fence replays run under. */
  public static Fence fence(String stream) {
    return new Fence("replay:" + stream, "replay", 0);
  }

  /**
   * Re-publishes the changes of {@code feed} from {@code from} (a time, or strictly after a
   * position) up to {@code until} (source time, inclusive), or, when {@code until} is null,
   * until the feed has been idle for {@code idle} (caught up with the present).
   *
   * @param flushEvery flush the handler after this many changes (and at the end)
   * @throws SinkException or whatever the handler threw, naming the change; changes before it
   *     were published (and flushed up to the last multiple of {@code flushEvery})
   */
  public static <D> Result range(
      ChangeFeed<D> feed,
      StartPoint from,
      Instant until,
      Duration idle,
      int flushEvery,
      Handler<D> handler) {
    return range(feed, from, until, idle, flushEvery, handler, (changes, last) -> { });
  }

  /** As {@link #range(ChangeFeed, StartPoint, Instant, Duration, int, Handler)}, telling {@code progress}. */
  public static <D> Result range(
      ChangeFeed<D> feed,
      StartPoint from,
      Instant until,
      Duration idle,
      int flushEvery,
      Handler<D> handler,
      Progress progress) {
    ConfigurationException.requireNonNull(progress, "progress");
    ConfigurationException.requireNonNull(feed, "feed");
    ConfigurationException.requireNonNull(from, "from");
    ConfigurationException.requireNonNull(idle, "idle");
    ConfigurationException.requireNonNull(handler, "handler");
    ConfigurationException.require(flushEvery >= 1, "flushEvery", flushEvery, "must be >= 1");
    ConfigurationException.require(!idle.isNegative() && !idle.isZero(), "idle", idle, "must be positive");
    Fence fence = fence(feed.stream());
    long count = 0;
    Position last = null;
    Clock clock = Clock.systemUTC();
    try (FeedCursor<D> cursor = feed.open(PartitionSpec.single(), from)) {
      Instant idleSince = clock.instant();
      boolean done = false;
      while (!done) {
        List<ChangeEvent<D>> batch = cursor.poll(Duration.ofMillis(Math.min(200, idle.toMillis())));
        if (batch.isEmpty()) {
          if (cursor.ended() || Duration.between(idleSince, clock.instant()).compareTo(idle) >= 0) {
            break;
          }
          continue;
        }
        idleSince = clock.instant();
        for (ChangeEvent<D> e : batch) {
          Instant t = e.time() != null ? e.time() : e.position().time();
          if (until != null && t != null && t.isAfter(until)) {
            done = true;
            break;
          }
          deliver(handler, e, fence);
          count++;
          last = e.position();
          if (count % flushEvery == 0) {
            flush(handler, fence, e);
          }
        }
        progress.progress(count, last);
      }
    }
    if (last != null) {
      flush(handler, fence, null);
    }
    return new Result(count, last);
  }

  /**
   * Publishes the current state of every document as a {@link Operation#SNAPSHOT} change (the
   * seed's option when no history is kept): for example {@code collection.find()}.
   *
   * @param replayId names this replay; change ids are {@code <replayId>:<key>}, so running the
   *     same replay again yields the same ids and consumers can de-duplicate
   * @param key the canonical key of a document (for MongoDB: {@code
   *     MongoChangeFeed.keyOf(doc.get("_id"))})
   * @param documentKey the document key as the backend represents it
   */
  public static <D> Result currentState(
      String stream,
      String replayId,
      Iterable<D> documents,
      Function<D, String> key,
      Function<D, D> documentKey,
      int flushEvery,
      Handler<D> handler) {
    ConfigurationException.requireNonNull(stream, "stream");
    ConfigurationException.requireNonNull(replayId, "replayId");
    ConfigurationException.require(!replayId.isBlank(), "replayId", "'" + replayId + "'", "must not be blank");
    ConfigurationException.requireNonNull(documents, "documents");
    ConfigurationException.requireNonNull(key, "key");
    ConfigurationException.requireNonNull(documentKey, "documentKey");
    ConfigurationException.require(flushEvery >= 1, "flushEvery", flushEvery, "must be >= 1");
    Fence fence = fence(stream);
    Instant now = Instant.now();
    long count = 0;
    Position last = null;
    for (D doc : documents) {
      Objects.requireNonNull(doc, "document");
      String k = key.apply(doc);
      Position p = new Position("snapshot:" + replayId + ":" + (count + 1), now);
      ChangeEvent<D> e =
          new ChangeEvent<>(replayId + ":" + k, stream, p, Operation.SNAPSHOT, k, documentKey.apply(doc), doc, now, null);
      deliver(handler, e, fence);
      count++;
      last = p;
      if (count % flushEvery == 0) {
        flush(handler, fence, e);
      }
    }
    if (last != null) {
      flush(handler, fence, null);
    }
    return new Result(count, last);
  }

  private static <D> void deliver(Handler<D> handler, ChangeEvent<D> e, Fence fence) {
    try {
      handler.handle(e, fence);
    } catch (SluiceException ex) {
      throw ex;
    } catch (Exception ex) {
      throw new SinkException("Replay failed on change " + e.id() + " (" + e + "): " + ex, ex);
    }
  }

  private static <D> void flush(Handler<D> handler, Fence fence, ChangeEvent<D> at) {
    try {
      handler.flush(fence);
    } catch (SluiceException ex) {
      throw ex;
    } catch (Exception ex) {
      throw new SinkException("Replay flush failed" + (at == null ? "" : " after change " + at) + ": " + ex, ex);
    }
  }
}
