package dev.sluice.listener.internal;

import dev.sluice.lease.internal.LeaseKeeper;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.listener.StaleFenceException;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Commits the checkpoint of a tenure: flushes the handler (a sink waits for its broker's
 * acknowledgements), then commits the last processed position as a fenced write. A flush failure
 * rewinds the cursor to the last checkpoint so the unacknowledged changes are delivered again; a
 * rejected commit means the lease is lost; a commit the store rejects for good (authorization,
 * validation) fails the partition naming the cause instead of retrying forever.
 */
final class Checkpointer<D> {
  private static final Logger log = LoggerFactory.getLogger(Checkpointer.class);

  private final Tenure<D> tenure;
  private final PartitionWorker<D> worker;

  Checkpointer(Tenure<D> tenure) {
    this.tenure = tenure;
    this.worker = tenure.worker;
  }

  /**
   * Whether the position moved past the last commit: changes were handled, or the cursor advanced
   * over changes of other partitions.
   */
  boolean somethingToCommit() {
    return tenure.lastProcessed != null && !tenure.lastProcessed.equals(tenure.committed);
  }

  /**
   * Processed changes are due after {@code maxDelay}; progress without changes (the cursor moved
   * over other partitions' changes or a post-batch resume token) after {@code heartbeat}.
   */
  boolean dueByTime() {
    if (!somethingToCommit()) {
      return false;
    }
    Duration after = tenure.uncommitted > 0
        ? tenure.config.checkpoint().maxDelay()
        : tenure.config.checkpoint().heartbeat();
    return System.nanoTime() - tenure.lastCommitNanos >= after.toNanos();
  }

  /** Flushes and commits what was processed; REWOUND if the flush failed. */
  Step checkpoint() {
    if (!somethingToCommit()) {
      return Step.CONTINUE;
    }
    if (tenure.uncommitted > 0) {
      try {
        tenure.config.handler().flush(tenure.fence);
      } catch (Throwable e) {
        if (Thread.interrupted()) {
          log.warn("The handler's flush left the interrupt flag set; cleared");
        }
        if (e instanceof StaleFenceException && !tenure.keeper().isValid()) {
          return Step.LOST;
        }
        log.warn("Handler flush failed for {}; re-delivering from checkpoint {}: {}",
            worker.leaseName, tenure.committed, Delivery.describe(e));
        Step reopened = tenure.reopenAtCheckpoint(Duration.ofMillis(200));
        return reopened == Step.CONTINUE ? Step.REWOUND : reopened;
      }
    }
    return commit(tenure.lastProcessed, tenure.uncommitted);
  }

  /** Commits {@code position} as a fenced write, retrying transient store errors. */
  Step commit(Position position, int changes) {
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
        tenure.committed = position;
        tenure.lastProcessed = position;
        tenure.uncommitted = 0;
        tenure.lastCommitNanos = System.nanoTime();
        worker.committed = position;
        worker.observer.committed(worker.leaseName, keeper.lease().epoch(), position, changes);
        if (tenure.cursor != null) {
          tenure.cursor.acknowledge(position);
        }
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
      } catch (RuntimeException e) {
        log.warn("Commit of {} for {} failed, retrying: {}", position, worker.leaseName, e.toString());
      }
      // Do not move past an uncommitted change; retry until the lease deadline says stop.
      worker.pause(backoff, tenure);
      backoff = PartitionWorker.min(backoff.multipliedBy(2), Duration.ofSeconds(1));
      if (!worker.running && ++triesWhileStopping >= 3) {
        // Closing with the store unreachable: give up; the next owner redelivers from the last
        // checkpoint (at least once), and close() does not hang for a whole lease.
        return Step.STOPPING;
      }
    }
  }
}
