package dev.sluice.listener.internal;

import dev.sluice.listener.AcknowledgedPrefix;
import dev.sluice.lease.internal.LeaseKeeper;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.listener.StaleFenceException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Commits the checkpoint of a tenure: flushes the handler (a sink waits for its broker's
 * acknowledgements), then commits the position the flush covered as a fenced write; pipelined,
 * the partition reads and handles on while flushes are pending (ADR 0073). A flush failure
 * rewinds the cursor to the last checkpoint so the unacknowledged changes are delivered again; a
 * rejected commit means the lease is lost; a commit the store rejects for good (authorization,
 * validation) fails the partition naming the cause instead of retrying forever.
 *
 * <p>It owns the tenure's tally (what is processed, what is committed, how many changes since the
 * last flush request); the feed loops tell it what they processed (ADR 0110).
 */
final class Checkpointer<D> {
  private static final Logger log = LoggerFactory.getLogger(Checkpointer.class);

  private final Tenure<D> tenure;
  private final PartitionWorker<D> worker;
  /** Flushes asked for and not yet committed, oldest first, each with what it covers. */
  private final ArrayDeque<InFlight> inFlight = new ArrayDeque<>();

  // The tenure's progress toward its checkpoint; this class alone changes it. Guarded by the
  // worker's delivery lock, as every step of the tenure.
  /** The last checkpoint committed (at first, the one the lease was granted with). */
  private Position committed;
  /** Every change up to here is processed (handled or parked), or the cursor moved past it. */
  private Position lastProcessed;
  /** Changes processed since the last flush was asked for (not yet covered by any flush). */
  private int uncommitted;
  private long lastCommitNanos;

  private static final long WAIT_SLICE_MILLIS = 100;
  /**
   * The wait before the changes of a failed flush are delivered again, doubled after each failure
   * in a row up to {@link #MAX_FLUSH_BACKOFF} and back to the first once a flush succeeds: a broker
   * that is down is tried (and the failure logged) once per back-off, not every 200 ms.
   */
  static final Duration FIRST_FLUSH_BACKOFF = Duration.ofMillis(200);
  static final Duration MAX_FLUSH_BACKOFF = Duration.ofSeconds(30);
  private Duration flushBackoff = FIRST_FLUSH_BACKOFF;

  private record InFlight(CompletableFuture<Void> done, Position position, int changes) {}

  /** For {@code tenure}, whose lease was granted with {@code checkpoint}. */
  Checkpointer(Tenure<D> tenure, Position checkpoint) {
    this.tenure = tenure;
    this.worker = tenure.worker;
    this.committed = checkpoint;
    this.lastProcessed = checkpoint;
    this.lastCommitNanos = System.nanoTime();
  }

  /** Every change up to here is processed, or the cursor moved past it; null before the first. */
  Position lastProcessed() {
    return lastProcessed;
  }

  /** {@code changes} more changes were processed, the last of them at {@code position}. */
  void processed(Position position, int changes) {
    lastProcessed = position;
    uncommitted += changes;
  }

  /**
   * The cursor moved to {@code position} without a change for this partition (other partitions'
   * changes, a post-batch resume token): worth committing too, so a restart does not re-scan it.
   */
  void advancedTo(Position position) {
    lastProcessed = position;
  }

  /** Whether {@code maxChanges} changes were processed since the last flush was asked for. */
  boolean dueByCount() {
    return uncommitted >= tenure.config.checkpoint().maxChanges();
  }

  /**
   * Whether the position moved past the last commit: changes were handled, or the cursor advanced
   * over changes of other partitions.
   */
  boolean somethingToCommit() {
    return lastProcessed != null && !lastProcessed.equals(committed);
  }

  /**
   * Processed changes are due after {@code maxDelay}; progress without changes (the cursor moved
   * over other partitions' changes or a post-batch resume token) after {@code heartbeat}.
   */
  boolean dueByTime() {
    if (!somethingToCommit()) {
      return false;
    }
    Duration after = uncommitted > 0
        ? tenure.config.checkpoint().maxDelay()
        : tenure.config.checkpoint().heartbeat();
    return System.nanoTime() - lastCommitNanos >= after.toNanos();
  }

  /**
   * The checkpoint due after {@code maxChanges} changes. Pipelined (ADR 0073): asks the handler
   * to flush what it was handed since the last request, commits whatever earlier flushes completed
   * meanwhile, and waits only while more than {@code flushesInFlight} are pending. Without
   * pipelining, {@link #checkpoint()}.
   */
  Step changesDue() {
    int depth = tenure.config.checkpoint().flushesInFlight();
    if (depth == 0) {
      return checkpoint();
    }
    requestFlush();
    Step step = acknowledged(false);
    while (step == Step.CONTINUE && inFlight.size() > depth) {
      step = acknowledged(true);
    }
    return step;
  }

  /**
   * Waits for every flush in flight, flushes the rest and commits all that was processed: the
   * checkpoint before a stop, a hand-back, the end of the stream, and after {@code maxDelay}.
   * REWOUND if a flush failed.
   */
  Step checkpoint() {
    if (!somethingToCommit()) {
      return Step.CONTINUE;
    }
    requestFlush();
    while (!inFlight.isEmpty()) {
      Step step = acknowledged(true);
      if (step != Step.CONTINUE) {
        return step;
      }
    }
    // Progress without changes since the last flush (other partitions' changes, resume tokens).
    return somethingToCommit() ? write(lastProcessed, 0) : Step.CONTINUE;
  }

  /**
   * Commits the newest flush that completed, with every one before it, in order; with {@code
   * wait}, first waits for the oldest pending one. REWOUND (after committing what did complete)
   * if a flush failed.
   */
  Step acknowledged(boolean wait) {
    InFlight newest = null;
    int changes = 0;
    Throwable failure = null;
    InFlight failed = null;
    while (!inFlight.isEmpty()) {
      InFlight head = inFlight.peek();
      if (!head.done().isDone() && (!wait || newest != null)) {
        break;
      }
      try {
        while (!head.done().isDone()) {
          if (!tenure.keeper().isValid()) {
            return Step.LOST; // nothing can be committed any more; the next owner redelivers
          }
          try {
            head.done().get(WAIT_SLICE_MILLIS, TimeUnit.MILLISECONDS);
          } catch (TimeoutException stillPending) {
            // look at the lease again
          }
        }
        head.done().get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure = e;
        failed = head;
        break;
      } catch (ExecutionException | CancellationException e) {
        failure = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        failed = head;
        break;
      }
      inFlight.poll();
      newest = head;
      changes += head.changes();
    }
    if (newest != null) {
      flushBackoff = FIRST_FLUSH_BACKOFF; // a flush succeeded: the broker answers again
      Step step = write(newest.position(), changes);
      if (step != Step.CONTINUE) {
        return step;
      }
    }
    return failure == null ? Step.CONTINUE : flushFailed(failure, failed);
  }

  /** Hands the changes handled since the last request to the handler's flush. */
  private void requestFlush() {
    if (uncommitted == 0) {
      return;
    }
    CompletableFuture<Void> done;
    long asked = System.nanoTime();
    try {
      done = tenure.config.handler().flushAsync(tenure.fence).toCompletableFuture();
    } catch (Throwable e) {
      done = CompletableFuture.failedFuture(e);
    }
    int changes = uncommitted;
    done.whenComplete((ok, failure) -> worker.observer.flushed(worker.leaseName, changes, System.nanoTime() - asked,
        failure));
    inFlight.add(new InFlight(done, lastProcessed, uncommitted));
    uncommitted = 0;
  }

  /** A flush failed: nothing after the last checkpoint counts; deliver again from it. */
  private Step flushFailed(Throwable e, InFlight failed) {
    inFlight.clear();
    if (Thread.interrupted()) {
      log.warn("The handler's flush left the interrupt flag set; cleared");
    }
    if (e instanceof StaleFenceException && !tenure.keeper().isValid()) {
      return Step.LOST;
    }
    Position prefix = acknowledgedPrefix(e, failed);
    if (prefix != null) {
      Step step = write(prefix, 0);
      if (step != Step.CONTINUE) {
        return step;
      }
    }
    Duration backoff = flushBackoff;
    flushBackoff = PartitionWorker.min(flushBackoff.multipliedBy(2), MAX_FLUSH_BACKOFF);
    log.warn("Handler flush failed for {}; re-delivering from checkpoint {} in {} ms: {}",
        worker.leaseName, committed, backoff.toMillis(), Delivery.describe(e));
    Step reopened = tenure.reopenAtCheckpoint(backoff);
    return reopened == Step.CONTINUE ? Step.REWOUND : reopened;
  }

  /**
   * The tenure goes back to its last checkpoint (the feed is read again from it): forgets the
   * flushes in flight and what was processed after the checkpoint.
   */
  void backToCheckpoint() {
    inFlight.clear();
    lastProcessed = committed;
    uncommitted = 0;
  }

  /**
   * Commits {@code position} with nothing before it left to flush (a pinned start): it is also
   * the last processed position.
   */
  Step commit(Position position, int changes) {
    inFlight.clear();
    Step step = write(position, changes);
    if (step == Step.CONTINUE) {
      lastProcessed = position;
      uncommitted = 0;
    }
    return step;
  }

  /**
   * The position through which the failed flush's changes were all made durable, when its
   * failure reports it ({@link AcknowledgedPrefix}), or null: only when changes are handled in
   * feed order (concurrency 1), so that the prefix in hand-over order is a prefix of the feed.
   */
  private Position acknowledgedPrefix(Throwable e, InFlight failed) {
    if (failed == null || tenure.config.concurrency() > 1) {
      return null;
    }
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof AcknowledgedPrefix p) {
        Position through = p.acknowledgedThrough();
        if (through == null || through.equals(committed)) {
          return null;
        }
        log.info("Flush failed for {}; committing the acknowledged prefix through {} before"
            + " delivering again", worker.leaseName, through);
        return through;
      }
    }
    return null;
  }

  /** Commits {@code position} as a fenced write, retrying transient store errors. */
  private Step write(Position position, int changes) {
    Duration backoff = Duration.ofMillis(50);
    int triesWhileStopping = 0;
    while (true) {
      LeaseKeeper keeper = tenure.keeper();
      if (!keeper.isValid()) {
        return Step.LOST;
      }
      long start = System.nanoTime();
      try {
        Lease result = tenure.config.leaseStore().commit(keeper.lease(), position);
        keeper.checkpointed(result);
        committed = position;
        lastCommitNanos = System.nanoTime();
        worker.progress().committed(position);
        worker.observer.committed(worker.leaseName, keeper.lease().epoch(), position, changes);
        tenure.acknowledgeToFeed(position);
        worker.attemptSucceeded(PartitionWorker.Retried.COMMIT);
        return Step.CONTINUE;
      } catch (LeaseLostException e) {
        keeper.markLost(e.getMessage());
        return Step.LOST;
      } catch (LeaseStoreException e) {
        if (!e.retryable()) {
          worker.fail("the lease store rejects the checkpoint commit of " + position
              + " (retrying cannot help): " + e.getMessage(), e);
          return Step.FAILED;
        }
        log.warn("Commit of {} for {} failed, retrying: {}", position, worker.leaseName, e.toString());
        worker.retrying(PartitionWorker.Retried.COMMIT, backoff, "cannot commit the checkpoint " + position, e);
      } catch (RuntimeException e) {
        log.warn("Commit of {} for {} failed, retrying: {}", position, worker.leaseName, e.toString());
        worker.retrying(PartitionWorker.Retried.COMMIT, backoff, "cannot commit the checkpoint " + position, e);
      }
      // Do not move past an uncommitted change; retry until the lease deadline says stop.
      worker.pause(backoff, tenure);
      backoff = PartitionWorker.min(backoff.multipliedBy(2), Duration.ofSeconds(1));
      if (!worker.running() && ++triesWhileStopping >= 3) {
        // Closing with the store unreachable: give up; the next owner redelivers from the last
        // checkpoint (at least once), and close() does not hang for a whole lease.
        return Step.STOPPING;
      }
    }
  }
}
