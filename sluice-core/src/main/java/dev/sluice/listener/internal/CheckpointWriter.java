package dev.sluice.listener.internal;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.lease.internal.LeaseKeeper;
import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes a tenure's acknowledged checkpoints off the partition's thread (ADR 0120): at most one
 * write in flight, coalescing (a position offered while a write is in flight replaces any
 * position still waiting, the newest acknowledged one wins). Each write is the store's fenced
 * commit under the tenure's lease, retried on transient errors as on the partition's thread
 * before; a rejected commit marks the lease lost at once (the partition stops at its next look);
 * a commit the store refuses for good is kept for the partition's thread to fail the partition.
 *
 * <p>The partition's thread offers positions and collects what was written ({@link #collect}),
 * and applies it to its own state (the committed position, the cursor's acknowledgement, the
 * status): the writer thread changes nothing of the partition's but the lease value
 * ({@link LeaseKeeper#checkpointed}, synchronized) and the retry status.
 */
final class CheckpointWriter {
  private static final Logger log = LoggerFactory.getLogger(CheckpointWriter.class);
  private static final Duration FIRST_BACKOFF = Duration.ofMillis(50);
  private static final Duration MAX_BACKOFF = Duration.ofSeconds(1);
  /** Tries of a write while the partition stops, as on the partition's thread (then it gives up). */
  private static final int TRIES_WHILE_STOPPING = 3;

  private final PartitionWorker<?> worker;
  private final LeaseKeeper keeper;
  private final Executor executor;

  // Guarded by this.
  /** The newest acknowledged position not yet taken by a write, or null. */
  private Position queued;
  private int queuedChanges;
  /** Whether a write (with its retries) is in flight or about to start. */
  private boolean writing;
  /** No write starts any more (the tenure ends). */
  private boolean closed;
  /** The newest position written and not yet collected, or null; with the changes it covers. */
  private Position written;
  private int writtenChanges;
  /** Why the store refused a commit for good (retrying cannot help), or null. */
  private RuntimeException refused;
  private Position refusedPosition;

  CheckpointWriter(PartitionWorker<?> worker, LeaseKeeper keeper, Executor executor) {
    this.worker = worker;
    this.keeper = keeper;
    this.executor = executor;
  }

  /** What the writer wrote since the last collect, and whether the store refused a commit for good. */
  record Written(Position position, int changes, RuntimeException refused, Position refusedPosition) {}

  /**
   * Every change up to {@code position} ({@code changes} of them since the last offer) is
   * acknowledged: write it as the checkpoint once the write in flight, if any, is done.
   */
  synchronized void offer(Position position, int changes) {
    if (closed || refused != null) {
      return;
    }
    queued = position;
    queuedChanges += changes;
    if (!writing) {
      writing = true;
      try {
        executor.execute(this::drain);
      } catch (RejectedExecutionException stopped) {
        writing = false; // the listener is closing: the partition's own last checkpoint writes it
      }
    }
  }

  /** Whether something was written or refused since the last {@link #collect}: read without the lock. */
  private volatile boolean news;

  /** Takes what was written (and a refusal) since the last call; null if nothing happened. */
  Written collect() {
    if (!news) {
      return null; // the partition's thread asks after every change: no lock, no garbage
    }
    synchronized (this) {
      news = false;
      Written w = new Written(written, writtenChanges, refused, refusedPosition);
      written = null;
      writtenChanges = 0;
      if (refused != null) {
        closed = true; // reported once; the partition fails and nothing more is written
        refused = null;
        refusedPosition = null;
      }
      return w;
    }
  }

  /**
   * Waits until no write is in flight or waiting, at most {@code timeout}. Returns whether the
   * writer is idle. The write in flight is bounded (the store's calls by the lease, ADR 0101; its
   * retries end when the lease is lost or, while the partition stops, after three tries).
   */
  synchronized boolean awaitIdle(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (writing) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      TimeUnit.NANOSECONDS.timedWait(this, left);
    }
    return true;
  }

  /** No write starts after this one; a waiting position is dropped, a retry ends at its next try. */
  synchronized void close() {
    closed = true;
    queued = null;
    notifyAll();
  }

  /** The writer thread: writes the newest waiting position until none is left. */
  private void drain() {
    while (true) {
      Position position;
      int changes;
      synchronized (this) {
        if (queued == null || closed || refused != null) {
          queued = null;
          writing = false;
          notifyAll();
          return;
        }
        position = queued;
        changes = queuedChanges;
        queued = null;
        queuedChanges = 0;
      }
      if (!write(position, changes)) {
        synchronized (this) {
          queued = null;
          writing = false;
          notifyAll();
        }
        return;
      }
    }
  }

  /**
   * Commits {@code position} as a fenced write, retrying transient errors with a growing back-off;
   * a newer position offered meanwhile is written instead at the next try. False once nothing more
   * can be written (the lease is lost, the store refused for good, the partition stops).
   */
  private boolean write(Position position, int changes) {
    Duration backoff = FIRST_BACKOFF;
    int triesWhileStopping = 0;
    while (true) {
      if (!keeper.isValid()) {
        return false;
      }
      try {
        Lease result = worker.config.leaseStore().commit(keeper.lease(), position);
        keeper.checkpointed(result);
        synchronized (this) {
          written = position;
          writtenChanges += changes;
          news = true;
          notifyAll();
        }
        return true;
      } catch (LeaseLostException e) {
        keeper.markLost(e.getMessage());
        return false;
      } catch (LeaseStoreException e) {
        if (!e.retryable()) {
          synchronized (this) {
            refused = e;
            refusedPosition = position;
            news = true;
          }
          return false;
        }
        retrying(position, backoff, e);
      } catch (RuntimeException e) {
        retrying(position, backoff, e);
      }
      synchronized (this) {
        if (closed) {
          return false;
        }
        try {
          TimeUnit.NANOSECONDS.timedWait(this, backoff.toNanos());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return false;
        }
        if (closed) {
          return false;
        }
        if (queued != null) { // the newest acknowledged position wins
          position = queued;
          changes += queuedChanges;
          queued = null;
          queuedChanges = 0;
        }
      }
      backoff = PartitionWorker.min(backoff.multipliedBy(2), MAX_BACKOFF);
      if (!worker.running() && ++triesWhileStopping >= TRIES_WHILE_STOPPING) {
        // Closing with the store unreachable: give up; the next owner redelivers from the last
        // checkpoint (at least once), and close() does not wait for a whole lease.
        return false;
      }
    }
  }

  private void retrying(Position position, Duration backoff, RuntimeException e) {
    log.warn("Commit of {} for {} failed, retrying: {}", position, worker.leaseName(), e.toString());
    worker.retrying(PartitionWorker.Retried.COMMIT, backoff, "cannot commit the checkpoint " + position, e);
  }
}
