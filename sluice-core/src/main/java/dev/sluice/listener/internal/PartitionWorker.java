package dev.sluice.listener.internal;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.feed.UndecodableChange;
import dev.sluice.feed.UndecodableChangeException;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.listener.StaleFenceException;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The feed loop of one partition: compete for its lease; while held, read the feed from the
 * checkpoint, hand each change to the handler in order, commit the checkpoint per the policy, and
 * stop the moment the lease is lost. Runs on its own thread.
 */
final class PartitionWorker<D> implements Runnable {
  private static final Logger log = LoggerFactory.getLogger(PartitionWorker.class);
  private static final Duration MAX_FEED_BACKOFF = Duration.ofSeconds(5);

  private final ListenerConfig<D> config;
  private final PartitionSpec partition;
  private final String leaseName;
  private final ScheduledExecutorService scheduler;
  private final ListenerObserver observer;
  private final Object wakeUp = new Object();

  private volatile boolean running = true;
  private volatile PartitionState state = PartitionState.ACQUIRING;
  private volatile String error;
  private volatile long heldEpoch;
  private volatile Position committed;
  private volatile Position newestRead;
  private final AtomicLong processed = new AtomicLong();

  // Owned by the worker thread while a lease is held.
  private HeldLease held;
  private FeedCursor<D> cursor;
  private Position lastProcessed;
  private int uncommitted;
  private long lastCommitNanos;
  private Set<String> parkedKeys = Set.of();

  private final Assignment assignment;

  PartitionWorker(ListenerConfig<D> config, int index, ScheduledExecutorService scheduler, Assignment assignment) {
    this.config = config;
    this.assignment = assignment;
    this.partition = new PartitionSpec(index, config.partitions());
    this.leaseName = config.leaseName(index);
    this.scheduler = scheduler;
    this.observer = config.observer();
  }

  String leaseName() {
    return leaseName;
  }

  PartitionStatus status() {
    Duration lag = Duration.ZERO;
    Position c = committed;
    Position n = newestRead;
    if (c != null && n != null && c.time() != null && n.time() != null && n.time().isAfter(c.time())) {
      lag = Duration.between(c.time(), n.time());
    }
    return new PartitionStatus(leaseName, state, heldEpoch, processed.get(), c, lag, error);
  }

  /** Asks the loop to stop; it finishes the handler call in progress, commits and releases. */
  void stop() {
    running = false;
    wake();
  }

  private void wake() {
    synchronized (wakeUp) {
      wakeUp.notifyAll();
    }
  }

  /** Waits up to {@code d}, returning early on stop or lease loss. */
  private void pause(Duration d) {
    long deadline = System.nanoTime() + d.toNanos();
    synchronized (wakeUp) {
      while (running && (held == null || held.lostReason() == null)) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          return;
        }
        try {
          TimeUnit.NANOSECONDS.timedWait(wakeUp, left);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          running = false;
          return;
        }
      }
    }
  }

  private void setState(PartitionState next) {
    PartitionState prev = state;
    if (prev != next) {
      state = next;
      log.info("Partition {} ({}): {} -> {}", leaseName, config.owner(), prev, next);
      observer.stateChanged(leaseName, prev, next);
    }
  }

  @Override
  public void run() {
    try {
      while (running) {
        setState(PartitionState.ACQUIRING);
        if (!assignment.mayAcquire(partition.index())) {
          pause(jitter(config.acquireInterval()));
          continue;
        }
        Lease lease;
        long requestStart = System.nanoTime();
        try {
          lease = config.leaseStore().tryAcquire(leaseName, config.owner(), config.leaseDuration()).orElse(null);
        } catch (RuntimeException e) {
          log.warn("Cannot reach the lease store to acquire '{}': {}", leaseName, e.toString());
          lease = null;
        }
        if (lease == null) {
          pause(jitter(config.acquireInterval()));
          continue;
        }
        assignment.acquired(partition.index());
        PartitionState end;
        try {
          end = hold(lease, requestStart);
        } finally {
          assignment.released(partition.index());
        }
        if (end == PartitionState.FAILED || end == PartitionState.ENDED) {
          setState(end);
          return;
        }
        if (end == PartitionState.LOST && running) {
          setState(PartitionState.LOST);
          pause(jitter(config.acquireInterval()));
        } else if (end == PartitionState.STOPPED && running) {
          // Handed back to balance the cluster: compete again later, within the fair share.
          pause(jitter(config.acquireInterval()));
        }
      }
    } catch (Throwable t) {
      error = "listener thread died: " + t;
      log.error("Partition {} worker died", leaseName, t);
      setState(PartitionState.FAILED);
      return;
    }
    setState(PartitionState.STOPPED);
  }

  private static Duration jitter(Duration d) {
    long n = d.toNanos();
    return Duration.ofNanos(n / 2 + ThreadLocalRandom.current().nextLong(n / 2 + 1));
  }

  /** Holds the lease until it is lost, the listener stops, or the partition fails or ends. */
  private PartitionState hold(Lease lease, long requestStart) {
    held = new HeldLease(config.leaseStore(), lease, requestStart, config.leaseDuration(), this::wake);
    held.startRenewing(scheduler, config.renewInterval());
    heldEpoch = lease.epoch();
    committed = lease.checkpoint();
    lastProcessed = lease.checkpoint();
    uncommitted = 0;
    lastCommitNanos = System.nanoTime();
    error = null;
    observer.acquired(lease);
    log.info("Partition {} acquired by {} with epoch {}, checkpoint {}",
        leaseName, config.owner(), lease.epoch(), lease.checkpoint());
    Fence fence = new Fence(leaseName, config.owner(), lease.epoch());
    try {
      loadParkedKeys();
      if (!openCursor(fence)) {
        return state == PartitionState.FAILED ? PartitionState.FAILED : PartitionState.LOST;
      }
      setState(PartitionState.ACTIVE);
      PartitionState end = feedLoop(fence);
      if (end != null) {
        return end;
      }
      // Stopped or handed back: commit what was processed, then hand the lease over at once.
      if (held.valid()) {
        checkpoint(fence);
      }
      return PartitionState.STOPPED;
    } catch (LeaseLostSignal lost) {
      return PartitionState.LOST;
    } catch (PartitionFailedSignal failed) {
      return PartitionState.FAILED;
    } finally {
      closeCursor();
      String lostReason = held.retire();
      if (lostReason == null) {
        try {
          config.leaseStore().release(held.lease());
        } catch (RuntimeException e) {
          log.warn("Release of lease '{}' failed; it will expire: {}", leaseName, e.toString());
        }
      } else {
        error = lostReason;
        observer.lost(leaseName, held.lease().epoch(), lostReason);
      }
      heldEpoch = 0;
      held = null;
    }
  }

  /** Opens the cursor at the checkpoint, or bootstraps and pins the start as the first checkpoint. */
  private boolean openCursor(Fence fence) {
    Duration backoff = Duration.ofMillis(100);
    while (running && held.valid()) {
      try {
        if (lastProcessed != null) {
          cursor = config.feed().open(partition, StartPoint.after(lastProcessed));
        } else {
          cursor = config.feed().open(partition, config.bootstrap().startPoint());
          // Pin the bootstrap point: a crash before the first change is processed must not let
          // the next owner resolve "latest" again and miss what came in between (figure 4b).
          commitPosition(cursor.position(), 0);
          log.info("Partition {} bootstrapped at {} ({})", leaseName, cursor.position(),
              config.bootstrap().startPoint());
        }
        return true;
      } catch (HistoryLostException e) {
        closeCursor();
        if (!onHistoryLost(e)) {
          return false;
        }
        return true;
      } catch (FeedException e) {
        closeCursor();
        if (!e.retryable()) {
          fail("feed cannot be opened: " + e.getMessage(), e);
          return false;
        }
        observer.feedFailed(leaseName, e);
        log.warn("Opening the feed for {} failed, retrying in {}: {}", leaseName, backoff, e.toString());
        pause(backoff);
        backoff = min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
      } catch (LeaseLostSignal | PartitionFailedSignal signal) {
        throw signal;
      } catch (RuntimeException e) {
        closeCursor();
        observer.feedFailed(leaseName, e);
        log.error("Opening the feed for {} threw an unexpected error, retrying in {}", leaseName, backoff, e);
        pause(backoff);
        backoff = min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
      }
    }
    return false;
  }

  /** @return true if delivery continues (skip to latest), false if the partition failed */
  private boolean onHistoryLost(HistoryLostException e) {
    if (config.historyLost() == HistoryLostPolicy.STOP) {
      observer.historyLost(leaseName, e, null);
      fail(e.getMessage() + " Policy STOP: partition stopped; no change was skipped.", e);
      return false;
    }
    cursor = config.feed().open(partition, StartPoint.latest());
    Position resumedAt = cursor.position();
    commitPosition(resumedAt, 0);
    observer.historyLost(leaseName, e, resumedAt);
    log.error("GAP in partition {}: {} Policy SKIP_TO_LATEST: continuing at {}; changes between {} "
        + "and {} were NOT delivered.", leaseName, e.getMessage(), resumedAt, e.lostFrom(), resumedAt);
    return true;
  }

  private void fail(String message, Throwable cause) {
    error = message;
    log.error("Partition {} FAILED: {}", leaseName, message, cause);
    setState(PartitionState.FAILED);
  }

  /** @return the end state, or null when stopped by close() */
  private PartitionState feedLoop(Fence fence) {
    Duration feedBackoff = Duration.ofMillis(100);
    while (running) {
      if (!held.valid()) {
        throw new LeaseLostSignal();
      }
      if (assignment.shouldHandBack(partition.index())) {
        log.info("Partition {}: handing back to balance the cluster", leaseName);
        return null;
      }
      List<ChangeEvent<D>> batch;
      try {
        batch = cursor.poll(config.pollWait());
        feedBackoff = Duration.ofMillis(100);
      } catch (HistoryLostException e) {
        checkpoint(fence);
        closeCursor();
        if (!onHistoryLost(e)) {
          return PartitionState.FAILED;
        }
        continue;
      } catch (FeedException e) {
        if (!e.retryable()) {
          checkpoint(fence);
          fail("feed failed: " + e.getMessage(), e);
          return PartitionState.FAILED;
        }
        observer.feedFailed(leaseName, e);
        log.warn("Feed of {} failed, re-opening at the last checkpoint in {}: {}", leaseName, feedBackoff, e.toString());
        reopenAtCheckpoint(fence, feedBackoff);
        feedBackoff = min(feedBackoff.multipliedBy(2), MAX_FEED_BACKOFF);
        continue;
      } catch (RuntimeException e) {
        // Not a typed feed error (a driver or feed bug): restart the cursor from the checkpoint
        // after a back-off rather than let the partition die (seed 004, "Error Handling").
        observer.feedFailed(leaseName, e);
        log.error("Feed of {} threw an unexpected error, re-opening at the last checkpoint in {}", leaseName, feedBackoff, e);
        reopenAtCheckpoint(fence, feedBackoff);
        feedBackoff = min(feedBackoff.multipliedBy(2), MAX_FEED_BACKOFF);
        continue;
      }
      for (ChangeEvent<D> event : batch) {
        if (!running) {
          break;
        }
        if (!held.valid()) {
          throw new LeaseLostSignal();
        }
        newestRead = event.position();
        if (!deliver(event, fence)) {
          break; // stopping: the change was not processed and stays after the checkpoint
        }
        if (uncommitted >= config.checkpoint().maxChanges() && !checkpoint(fence)) {
          break; // flush failed and the cursor was rewound: the rest of this batch is stale
        }
      }
      if (batch.isEmpty() && running && cursor != null) {
        // Progress without changes for this partition (other partitions' changes, post-batch
        // resume tokens) is worth committing too, so a restart does not re-scan it.
        Position p = cursor.position();
        if (p != null) {
          lastProcessed = p;
        }
      }
      if (dueByTime()) {
        checkpoint(fence);
      }
      if (cursor == null) {
        // A failed flush rewound the cursor while the listener was closing: nothing to end.
        break;
      }
      if (cursor.ended()) {
        checkpoint(fence);
        Position at = cursor.position();
        observer.streamEnded(leaseName, at);
        error = "the source ended the stream at " + at;
        log.warn("Partition {}: {}", leaseName, error);
        return PartitionState.ENDED;
      }
    }
    return null;
  }

  /**
   * Whether the position moved past the last commit: changes were handled, or the cursor advanced
   * over changes of other partitions.
   */
  private boolean somethingToCommit() {
    return lastProcessed != null && !lastProcessed.equals(committed);
  }

  private boolean dueByTime() {
    if (!somethingToCommit()) {
      return false;
    }
    return System.nanoTime() - lastCommitNanos >= config.checkpoint().maxDelay().toNanos();
  }

  /**
   * Hands one change to the handler, retrying per the failure policy.
   *
   * @return false if the listener is stopping and the change was not processed
   */
  private boolean deliver(ChangeEvent<D> event, Fence fence) {
    FailurePolicy policy = config.failure();
    RetryPolicy retry = policy.retry();
    if (policy instanceof FailurePolicy.Park<?> && parkedKeys.contains(event.key())) {
      park(event, "parked behind an earlier parked change of key " + event.key(), 0);
      return true;
    }
    int attempt = 1;
    while (true) {
      long start = System.nanoTime();
      try {
        if (event.raw() instanceof UndecodableChange undecodable) {
          throw new UndecodableChangeException(event, undecodable);
        }
        config.handler().handle(event, fence);
        processed.incrementAndGet();
        observer.delivered(event, System.nanoTime() - start);
        lastProcessed = event.position();
        uncommitted++;
        return true;
      } catch (StaleFenceException e) {
        held.markLost(e.getMessage());
        throw new LeaseLostSignal();
      } catch (Exception e) {
        observer.handlerFailed(event, attempt, e);
        if (attempt >= retry.maxAttempts() && policy instanceof FailurePolicy.Park<?>) {
          park(event, describe(e), attempt);
          return true;
        }
        Duration delay = retry.delayAfter(Math.min(attempt, 64));
        log.warn("Handler failed on {} (attempt {}{}), retrying in {}: {}", event, attempt,
            attempt >= retry.maxAttempts() ? ", blocking the partition until it succeeds" : "",
            delay, describe(e));
        pause(delay);
        if (!running) {
          // Not processed: the next owner gets it again from the checkpoint.
          return false;
        }
        if (!held.valid()) {
          throw new LeaseLostSignal();
        }
        attempt++;
      }
    }
  }

  @SuppressWarnings("unchecked")
  private void park(ChangeEvent<D> event, String reason, int attempts) {
    DeadLetterStore<D> store = ((FailurePolicy.Park<D>) config.failure()).store();
    Duration backoff = Duration.ofMillis(100);
    while (true) {
      try {
        store.park(new ParkedChange<>(event, partition.index(), reason, attempts, config.clock().instant()));
        break;
      } catch (RuntimeException e) {
        // Never skip a change we could not park: retry until it is durable or the lease is gone.
        log.warn("Parking {} failed, retrying: {}", event, e.toString());
        pause(backoff);
        backoff = min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
        if (!held.valid() || !running) {
          throw new LeaseLostSignal();
        }
      }
    }
    parkedKeys.add(event.key());
    observer.parked(event, reason);
    log.warn("Parked {}: {}", event, reason);
    lastProcessed = event.position();
    uncommitted++;
  }

  /**
   * Loads the keys already parked for this partition, so their later changes are parked behind
   * them. The dead-letter store may be briefly unreachable: retry while the lease lasts, because
   * delivering without knowing the parked keys could overtake a parked change of the same key.
   */
  private void loadParkedKeys() {
    if (!(config.failure() instanceof FailurePolicy.Park<?> park)) {
      parkedKeys = Set.of();
      return;
    }
    Duration backoff = Duration.ofMillis(100);
    while (true) {
      if (!running || !held.valid()) {
        throw new LeaseLostSignal();
      }
      try {
        parkedKeys = new HashSet<>(park.store().parkedKeys(config.feed().stream(), partition.index()));
        return;
      } catch (RuntimeException e) {
        log.warn("Cannot read parked keys of {} from the dead-letter store, retrying in {}: {}",
            leaseName, backoff, e.toString());
        pause(backoff);
        backoff = min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
      }
    }
  }

  private static String describe(Throwable e) {
    return e.getClass().getName() + ": " + e.getMessage();
  }

  /**
   * Flushes the handler and commits the last processed position. A flush failure rewinds the
   * cursor to the last checkpoint so the unacknowledged changes are delivered again.
   *
   * @return false if the cursor was rewound
   */
  private boolean checkpoint(Fence fence) {
    if (!somethingToCommit()) {
      return true;
    }
    if (uncommitted > 0) {
      try {
        config.handler().flush(fence);
      } catch (StaleFenceException e) {
        held.markLost(e.getMessage());
        throw new LeaseLostSignal();
      } catch (Exception e) {
        log.warn("Handler flush failed for {}; re-delivering from checkpoint {}: {}",
            leaseName, committed, describe(e));
        reopenAtCheckpoint(fence, Duration.ofMillis(200));
        return false;
      }
    }
    commitPosition(lastProcessed, uncommitted);
    return true;
  }

  private void commitPosition(Position position, int changes) {
    Duration backoff = Duration.ofMillis(50);
    while (true) {
      if (!held.valid()) {
        throw new LeaseLostSignal();
      }
      try {
        Lease result = config.leaseStore().commit(held.lease(), position);
        held.updateCheckpoint(result);
        committed = position;
        lastProcessed = position;
        uncommitted = 0;
        lastCommitNanos = System.nanoTime();
        observer.committed(leaseName, held.lease().epoch(), position, changes);
        if (cursor != null) {
          cursor.acknowledge(position);
        }
        return;
      } catch (LeaseLostException e) {
        held.markLost(e.getMessage());
        throw new LeaseLostSignal();
      } catch (RuntimeException e) {
        // Do not move past an uncommitted change; retry until the lease deadline says stop.
        log.warn("Commit of {} for {} failed, retrying: {}", position, leaseName, e.toString());
        pause(backoff);
        backoff = min(backoff.multipliedBy(2), Duration.ofSeconds(1));
      }
    }
  }

  private void reopenAtCheckpoint(Fence fence, Duration delay) {
    closeCursor();
    lastProcessed = committed;
    uncommitted = 0;
    pause(delay);
    if (!running) {
      return;
    }
    if (!openCursor(fence)) {
      if (state == PartitionState.FAILED) {
        throw new PartitionFailedSignal();
      }
      throw new LeaseLostSignal();
    }
  }

  private void closeCursor() {
    if (cursor != null) {
      try {
        cursor.close();
      } catch (RuntimeException e) {
        log.debug("Closing cursor of {} failed: {}", leaseName, e.toString());
      }
      cursor = null;
    }
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }

  /** Unwinds the feed loop when the lease is lost. */
  private static final class LeaseLostSignal extends RuntimeException {
    private static final long serialVersionUID = 1L;

    LeaseLostSignal() {
      super(null, null, false, false);
    }
  }

  /** Unwinds the feed loop when the partition failed for good. */
  private static final class PartitionFailedSignal extends RuntimeException {
    private static final long serialVersionUID = 1L;

    PartitionFailedSignal() {
      super(null, null, false, false);
    }
  }
}
