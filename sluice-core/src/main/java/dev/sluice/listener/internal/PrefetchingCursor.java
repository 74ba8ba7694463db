package dev.sluice.listener.internal;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the next batch while the partition handles the current one (ADR 0074): a reader thread
 * owns the feed's cursor and polls it once ahead; {@link #poll} hands over that batch and starts
 * the next read. Everything the engine asks about the cursor ({@link #position}, {@link
 * #caughtUp}, {@link #ended}) is the state right after the batch it was last handed, not the
 * state of the read running ahead; acknowledgements are passed to the cursor by the reader thread
 * before its next read, so the cursor is only ever used by one thread. A read's failure is thrown
 * by the {@link #poll} that would have returned its batch, in order.
 */
final class PrefetchingCursor<D> implements FeedCursor<D> {
  private static final Logger log = LoggerFactory.getLogger(PrefetchingCursor.class);
  /** How much longer than its own wait a read may take before close() stops waiting for it. */
  private static final Duration CLOSE_GRACE = Duration.ofSeconds(10);

  /** A batch and the cursor's state right after it was read. */
  private record Read<D>(List<ChangeEvent<D>> batch, Position position, boolean caughtUp,
      boolean ended, String endReason) {}

  private final FeedCursor<D> cursor;
  private final Duration wait;
  private final ExecutorService reader;
  // Used by the consuming (partition) thread only, except pendingAck.
  private CompletableFuture<Read<D>> ahead;
  private Read<D> last;
  private volatile Position pendingAck;
  private boolean closed;

  /**
   * Wraps {@code cursor}, just opened, and starts reading ahead with {@code wait} per read (the
   * partition's poll wait).
   */
  PrefetchingCursor(FeedCursor<D> cursor, Duration wait, String name) {
    this.cursor = cursor;
    this.wait = wait;
    this.last = new Read<>(List.of(), cursor.position(), false, cursor.ended(),
        cursor.ended() ? cursor.endReason() : null);
    this.reader = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "sluice-read/" + name);
      t.setDaemon(true);
      return t;
    });
    readAhead();
  }

  private void readAhead() {
    ahead = CompletableFuture.supplyAsync(() -> {
      Position ack = pendingAck;
      if (ack != null) {
        pendingAck = null;
        cursor.acknowledge(ack);
      }
      List<ChangeEvent<D>> batch = cursor.poll(wait);
      boolean ended = cursor.ended();
      return new Read<>(batch, cursor.position(), cursor.caughtUp(), ended,
          ended ? cursor.endReason() : null);
    }, reader);
  }

  @Override
  public List<ChangeEvent<D>> poll(Duration maxWait) {
    if (last.ended()) {
      return List.of();
    }
    Read<D> read;
    try {
      read = ahead.get(Math.max(0, maxWait.toNanos()), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      return List.of(); // still reading: the same read is handed over by a later poll
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return List.of();
    } catch (ExecutionException e) {
      // No read after a failed one: the engine closes this cursor and opens another at its
      // checkpoint (or stops); a poll meanwhile throws the same failure again.
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new IllegalStateException(cause);
    }
    last = read;
    if (!read.ended()) {
      readAhead();
    }
    return read.batch();
  }

  @Override
  public Position position() {
    return last.position();
  }

  @Override
  public boolean caughtUp() {
    return last.caughtUp();
  }

  @Override
  public boolean ended() {
    return last.ended();
  }

  @Override
  public String endReason() {
    return last.endReason() != null ? last.endReason() : cursor.endReason();
  }

  @Override
  public void acknowledge(Position committed) {
    pendingAck = committed;
  }

  /** Waits for the read in progress (at most its wait and a grace), then closes the cursor. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      ahead.get(wait.plus(CLOSE_GRACE).toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException e) {
      // the read failed; nobody will consume it
    } catch (TimeoutException e) {
      log.warn("Read of {} still running {} after close; closing its cursor anyway",
          Thread.currentThread().getName(), wait.plus(CLOSE_GRACE));
    }
    reader.shutdown();
    try {
      cursor.close();
    } finally {
      reader.shutdownNow();
    }
  }
}
