package dev.sluice.listener.internal;

import dev.sluice.ConfigurationException;
import dev.sluice.Ticker;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.Lease;
import dev.sluice.lease.internal.LeaseKeeper;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.PartitionState;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One lease held by one {@link PartitionWorker}, from acquisition to loss, hand-back, stop or
 * failure: checks the group's partition layout, opens the feed at the checkpoint (or bootstraps
 * and pins the start), then runs the feed loop: read a batch, hand each change to {@link
 * Delivery}, let {@link Checkpointer} commit per the policy, and handle history loss and the end
 * of the stream. Whatever way it ends, the lease is released unless it was lost.
 *
 * <p>It owns the cursor and the rest of the last batch; what is processed and committed is the
 * {@link Checkpointer}'s, and the progress the status shows is {@link PartitionProgress}'s: the
 * tenure tells them (ADR 0110).
 */
final class Tenure<D> {
  private static final Logger log = LoggerFactory.getLogger(Tenure.class);
  static final Duration MAX_FEED_BACKOFF = Duration.ofSeconds(5);
  private static final Duration FIRST_FEED_BACKOFF = Duration.ofMillis(100);

  final PartitionWorker<D> worker;
  final ListenerConfig<D> config;
  final Fence fence;
  private final LeaseKeeper keeper;
  final ParkedKeys<D> parked;
  final Checkpointer<D> checkpointer;
  private final Delivery<D> delivery;
  /** With a concurrency above 1: delivers a batch over the worker's lanes; else null. */
  private final KeyedDelivery<D> keyed;

  // Guarded by worker.deliveryLock.
  private FeedCursor<D> cursor;
  private boolean ended;

  /** When the lease was granted to this tenure (System.nanoTime, after the store answered). */
  private final long heldSince = System.nanoTime();

  @SuppressWarnings("unchecked")
  Tenure(PartitionWorker<D> worker, Lease lease, long requestStartNanos) {
    this.worker = worker;
    this.config = worker.config;
    this.fence = new Fence(worker.leaseName, config.owner(), lease.epoch());
    this.keeper = new LeaseKeeper(config.leaseStore(), lease, requestStartNanos,
        config.leaseDuration(), config.renewInterval(), worker.scheduler, Ticker.system(),
        (lost, cause) -> worker.leaseLost(lease, keeper().lostReason()));
    this.parked = config.failure() instanceof FailurePolicy.Park<?> park
        ? new ParkedKeys<>(((FailurePolicy.Park<D>) park).store(), config.deadLetterScope(),
            worker.partition.index(), config.clock(), park.maxCachedKeys())
        : ParkedKeys.none();
    this.checkpointer = new Checkpointer<>(this, lease.checkpoint());
    this.delivery = new Delivery<>(this);
    this.keyed = config.concurrency() > 1
        ? new KeyedDelivery<>(this, delivery, worker.lanes(), config.concurrency()) : null;
    worker.progress().startedAt(lease.checkpoint());
  }

  LeaseKeeper keeper() {
    return keeper;
  }

  boolean ended() {
    return ended;
  }

  /** Whether {@link #begin} ran. Guarded by worker.deliveryLock. */
  private boolean begun;
  /** The back-off before re-opening a failed feed; grows with each failure in a row. */
  private Duration feedBackoff = FIRST_FEED_BACKOFF;
  /** The last turn found nothing to read and its cursor parked (FeedCursor#wakeInsteadOfWaiting). */
  private volatile boolean cursorParked;
  /** The changes of the last batch not yet delivered: the first waits for its next attempt. */
  private final ArrayDeque<ChangeEvent<D>> pending = new ArrayDeque<>();
  /** After a turn that returned null: how long until a failed change's next attempt, or null. */
  private volatile Duration retryIn;

  /**
   * Runs the tenure's next part on the calling thread: its start (layout check, parked keys, the
   * feed opened) on the first call, then one batch of the feed loop per call. Returns null while
   * the lease is held and there is more to do ({@link #cursorParked()} says whether to wait for the
   * cursor first); otherwise how the tenure ended, the lease released unless it was lost.
   */
  PartitionState turn() {
    worker.deliveryLock.lock();
    boolean over = true;
    try {
      PartitionState end = begun ? feedTurn() : begin();
      over = end != null;
      return end;
    } finally {
      try {
        if (over) {
          finish(); // also when the turn threw
        }
      } finally {
        worker.deliveryLock.unlock();
      }
    }
  }

  /** After a turn that returned null: whether the cursor parked and will wake the worker. */
  boolean cursorParked() {
    return cursorParked;
  }

  /** After a turn that returned null: the wait before a failed change is tried again, or null. */
  Duration retryIn() {
    return retryIn;
  }

  /** Starts holding: the renewals, the layout check, the parked keys, the feed. Null once streaming. */
  private PartitionState begin() {
    begun = true;
    keeper.start();
    Lease lease = keeper.lease();
    worker.progress().holding(lease);
    worker.observer.acquired(lease); // logged by LifecycleLog
    Step step = checkLayout();
    if (step == Step.CONTINUE) {
      step = loadParkedKeys();
    }
    if (step == Step.CONTINUE) {
      step = open();
    }
    if (step == Step.CONTINUE) {
      worker.setState(PartitionState.ACTIVE);
      return null;
    }
    return endOf(step);
  }

  private PartitionState endOf(Step step) {
    return switch (step) {
      case FAILED -> PartitionState.FAILED;
      case LOST -> PartitionState.LOST;
      default -> PartitionState.STOPPED;
    };
  }

  /** Closes the cursor and releases the lease unless it was lost or already handed over. */
  private void finish() {
    closeCursor();
    if (ended) {
      return;
    }
    ended = true;
    String lostReason = keeper.retire();
    if (lostReason != null) {
      return; // reported by the keeper's callback when it happened
    }
    release();
  }

  private void release() {
    try {
      config.leaseStore().release(keeper.lease());
    } catch (RuntimeException e) {
      log.warn("Release of lease '{}' failed; it will expire: {}", worker.leaseName, e.toString());
    }
  }

  /**
   * Called by the closing thread: waits for the handler call in progress, commits what was
   * processed and releases the lease, while a turn of the partition may still be blocked in a read.
   */
  void handOverFromOutside() {
    worker.deliveryLock.lock();
    try {
      if (ended) {
        return;
      }
      if (keeper.isValid() && cursor != null) {
        checkpointer.checkpoint();
      }
      ended = true;
      if (keeper.retire() == null) {
        release();
        log.info("Partition {}: handed over by close()", worker.leaseName);
      }
    } finally {
      worker.deliveryLock.unlock();
    }
  }

  /**
   * Refuses to run when the group already has partition records for another partition count:
   * two layouts of one group would deliver the same changes twice, to two owners at once.
   */
  private Step checkLayout() {
    return retryingReads("Cannot list the partition records of {} to check the group's layout,"
        + " retrying in {}: {}", "cannot list the group's partition records to check its layout",
        () -> {
          String conflict = worker.layout.conflictSince(heldSince);
          if (conflict == null) {
            return Step.CONTINUE;
          }
          worker.fail(conflict, null);
          return Step.FAILED;
        });
  }

  private Step loadParkedKeys() {
    // Delivering without knowing the parked keys could overtake a parked change of a key.
    return retryingReads("Cannot read parked keys of {} from the dead-letter store, retrying in"
        + " {}: {}", "cannot read the parked keys from the dead-letter store", () -> {
          parked.load();
          return Step.CONTINUE;
        });
  }

  /**
   * Runs {@code read} until it answers, while the lease is held and the listener runs: a
   * RuntimeException is logged ({@code logPattern} with the lease, the back-off and the error),
   * shown in the status as a READ retried ({@code retrying}), and tried again after a back-off
   * that grows each time.
   */
  private Step retryingReads(String logPattern, String retrying, Supplier<Step> read) {
    Duration backoff = FIRST_FEED_BACKOFF;
    while (worker.running()) {
      if (!keeper.isValid()) {
        return Step.LOST;
      }
      try {
        return read.get();
      } catch (RuntimeException e) {
        log.warn(logPattern, worker.leaseName, backoff, e.toString());
        worker.retrying(PartitionWorker.Retried.READ, backoff, retrying, e);
        worker.pause(backoff, this);
        backoff = PartitionWorker.min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
      }
    }
    return Step.STOPPING;
  }

  /**
   * Opens the cursor at the checkpoint, or bootstraps and pins the start as the first checkpoint;
   * on lost history applies the policy. Retries transient errors with back-off.
   */
  Step open() {
    return open(null);
  }

  /** As {@link #open()}; with {@code skipping} set, history was lost and the policy skips. */
  private Step open(HistoryLostException skipping) {
    Duration backoff = Duration.ofMillis(100);
    while (worker.running()) {
      if (!keeper.isValid()) {
        return Step.LOST;
      }
      try {
        if (skipping != null) {
          boolean repair = config.historyLost() == HistoryLostPolicy.RESNAPSHOT;
          cursor = openCursor(repair ? StartPoint.snapshot() : StartPoint.latest());
          Position resumedAt = cursor.position();
          // The status shows the gap before the checkpoint moves past it: whoever sees the new
          // checkpoint (an operator, a test) also sees why changes before it were skipped.
          worker.recordError("history lost; " + (repair ? "repairing by a snapshot of the partition's keys from "
              : "skipped to latest at ") + resumedAt + ": " + skipping.getMessage());
          Step pinned = checkpointer.commit(resumedAt, 0);
          if (pinned != Step.CONTINUE) {
            return pinned;
          }
          worker.observer.historyLost(worker.leaseName, skipping, resumedAt);
          if (repair) {
            log.error("GAP in partition {}: {} Policy RESNAPSHOT: every document of the partition is read"
                + " again as a SNAPSHOT change while the stream goes on from the latest position; changes"
                + " from {} on are repaired by it, except documents deleted meanwhile, which no change"
                + " reports any more.", worker.leaseName, skipping.getMessage(), skipping.lostFrom());
          } else {
            log.error("GAP in partition {}: {} Policy SKIP_TO_LATEST: continuing at {}; changes"
                + " between {} and {} were NOT delivered.", worker.leaseName, skipping.getMessage(),
                resumedAt, skipping.lostFrom(), resumedAt);
          }
        } else if (checkpointer.lastProcessed() != null) {
          cursor = openCursor(StartPoint.after(checkpointer.lastProcessed()));
        } else {
          cursor = openCursor(config.bootstrap().startPoint());
          // Pin the bootstrap point: a crash before the first change is processed must not let
          // the next owner resolve "latest" again and miss what came in between (figure 4b).
          Step pinned = checkpointer.commit(cursor.position(), 0);
          if (pinned != Step.CONTINUE) {
            return pinned;
          }
          log.info("Partition {} bootstrapped at {} ({})", worker.leaseName, cursor.position(),
              config.bootstrap().startPoint());
        }
        return Step.CONTINUE;
      } catch (HistoryLostException e) {
        closeCursor();
        if (config.historyLost() == HistoryLostPolicy.STOP) {
          worker.observer.historyLost(worker.leaseName, e, null);
          worker.fail(e.getMessage() + " Policy STOP: partition stopped; no change was skipped.", e);
          return Step.FAILED;
        }
        skipping = e; // open at latest on the next turn, with the same retries as any open
      } catch (ConfigurationException e) {
        // The feed refuses this configuration against the source (an image mode the collection
        // does not record, a start point the deployment cannot serve): no retry helps until an
        // operator acts, so the partition fails with the feed's message, which names the remedy.
        closeCursor();
        worker.fail("feed refuses to open: " + e.getMessage(), e);
        return Step.FAILED;
      } catch (FeedException e) {
        closeCursor();
        if (!e.retryable()) {
          worker.fail("feed cannot be opened: " + e.getMessage(), e);
          return Step.FAILED;
        }
        worker.observer.feedFailed(worker.leaseName, e);
        log.warn("Opening the feed for {} failed, retrying in {}: {}", worker.leaseName, backoff,
            e.toString());
        worker.retrying(PartitionWorker.Retried.READ, backoff, "opening the feed failed", e);
        worker.pause(backoff, this);
        backoff = PartitionWorker.min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
      } catch (RuntimeException e) {
        closeCursor();
        worker.observer.feedFailed(worker.leaseName, e);
        log.error("Opening the feed for {} threw an unexpected error, retrying in {}",
            worker.leaseName, backoff, e);
        worker.retrying(PartitionWorker.Retried.READ, backoff, "opening the feed threw an unexpected error", e);
        worker.pause(backoff, this);
        backoff = PartitionWorker.min(backoff.multipliedBy(2), MAX_FEED_BACKOFF);
      }
    }
    return Step.STOPPING;
  }

  /**
   * Opens the partition's cursor at {@code start}. On a feed whose cursors do not wake the worker
   * instead of waiting, the cursor is read ahead on a thread of its own, which does (ADR 0130). A
   * feed whose cursors park (a shared reader) is never wrapped, not even a cursor of its own that
   * it opens for a partition behind it: a thousand partitions must not mean a thousand threads.
   */
  private FeedCursor<D> openCursor(StartPoint start) {
    FeedCursor<D> c = config.feed().open(worker.partition, start);
    if (!c.wakeInsteadOfWaiting(worker::cursorReady, worker::waitingForThread) && !config.feed().cursorsPark()) {
      c = ReadAheadCursor.start(c, worker.leaseName, config.pollWait(), worker::cursorReady);
    }
    return c;
  }

  /** Closes the cursor and opens it again at the last checkpoint after {@code delay}. */
  Step reopenAtCheckpoint(Duration delay) {
    closeCursor();
    dropPending();
    checkpointer.backToCheckpoint();
    worker.pause(delay, this);
    if (!worker.running() || ended) {
      return Step.STOPPING;
    }
    return open();
  }

  /**
   * One turn of the feed loop: what happens to one batch, top to bottom. Null while there is more
   * to do; otherwise how the tenure ends.
   */
  private PartitionState feedTurn() {
    cursorParked = false;
    retryIn = null;
    PartitionState endedEarly = endBeforeReading();
    if (endedEarly != null) {
      return endedEarly;
    }
    boolean read = pending.isEmpty(); // else the rest of the last batch first
    Read<D> batch = read ? readBatch() : Read.nothing();
    if (ended) {
      return PartitionState.STOPPED; // handed over by close() while we were reading
    }
    Step step = batch.step() == Step.CONTINUE ? deliver(batch.changes()) : batch.step();
    boolean retryLater = step == Step.RETRY_LATER;
    if (retryLater) {
      step = Step.CONTINUE; // the failed change and the rest stay pending; no thread waits meanwhile
    }
    if (step == Step.CONTINUE) {
      step = checkpointer.acknowledged(false); // flushes that completed while we read
    }
    if (step == Step.REWOUND) {
      return null; // the rest of the batch is stale; the cursor reads again from the checkpoint
    }
    if (step != Step.CONTINUE) {
      return endWith(step);
    }
    recordProgress(read && batch.changes().isEmpty());
    if (checkpointer.dueByTime()) {
      step = checkpointer.checkpoint();
      if (step != Step.CONTINUE && step != Step.REWOUND) {
        return endWith(step);
      }
    }
    if (retryLater && !pending.isEmpty()) { // (empty if a rewind by that checkpoint dropped it)
      retryIn = delivery.retryIn();
      return null;
    }
    if (cursor != null && cursor.ended()) {
      return streamEnded();
    }
    cursorParked = read && batch.changes().isEmpty() && cursor != null && cursor.parked();
    return null;
  }

  /** How the turn ends the tenure before reading (a stop, a lost lease, a hand-back), or null. */
  private PartitionState endBeforeReading() {
    if (!worker.running() || ended) {
      return stopping();
    }
    if (!keeper.isValid()) {
      return PartitionState.LOST;
    }
    if (worker.assignment.shouldHandBack(worker.partition.index())) {
      log.info("Partition {}: handing back to balance the cluster", worker.leaseName);
      Step s = checkpointer.checkpoint();
      return s == Step.FAILED ? PartitionState.FAILED
          : s == Step.LOST ? PartitionState.LOST : PartitionState.STOPPED;
    }
    return null;
  }

  /**
   * The changes a read gave (none when it failed), and how the loop goes on: after a failure, what
   * dealing with it gave (CONTINUE once the feed re-opened; else LOST, FAILED or STOPPING).
   */
  private record Read<E>(List<ChangeEvent<E>> changes, Step step) {
    static <E> Read<E> nothing() {
      return new Read<>(List.of(), Step.CONTINUE);
    }

    static <E> Read<E> failed(Step step) {
      return new Read<>(List.of(), step);
    }
  }

  /** Reads the next batch; a failure of the feed is handled here (re-open, lost history, fail). */
  private Read<D> readBatch() {
    try {
      List<ChangeEvent<D>> changes = pollUnlocked();
      worker.attemptSucceeded(PartitionWorker.Retried.READ);
      feedBackoff = FIRST_FEED_BACKOFF;
      return new Read<>(changes, Step.CONTINUE);
    } catch (HistoryLostException e) {
      Step step = checkpointer.checkpoint();
      if (step == Step.CONTINUE) {
        closeCursor();
        step = historyLostWhileReading(e);
      }
      return Read.failed(step);
    } catch (FeedException e) {
      if (!e.retryable()) {
        Step step = checkpointer.checkpoint();
        if (step == Step.CONTINUE || step == Step.REWOUND) {
          worker.fail("feed failed: " + e.getMessage(), e);
          step = Step.FAILED;
        }
        return Read.failed(step);
      }
      worker.observer.feedFailed(worker.leaseName, e);
      log.warn("Feed of {} failed, re-opening at the last checkpoint in {}: {}",
          worker.leaseName, feedBackoff, e.toString());
      return Read.failed(reopenAfterReadFailure(
          "reading the feed failed; re-opening at the last checkpoint", e));
    } catch (RuntimeException e) {
      // Not a typed feed error (a driver or feed bug): restart the cursor from the checkpoint
      // after a back-off rather than let the partition die (seed 004, "Error Handling").
      worker.observer.feedFailed(worker.leaseName, e);
      log.error("Feed of {} threw an unexpected error, re-opening at the last checkpoint in {}",
          worker.leaseName, feedBackoff, e);
      return Read.failed(reopenAfterReadFailure(
          "reading the feed threw an unexpected error; re-opening at the last checkpoint", e));
    }
  }

  /** A read failed, worth retrying: re-open at the checkpoint after a back-off that grows each time. */
  private Step reopenAfterReadFailure(String message, RuntimeException e) {
    worker.retrying(PartitionWorker.Retried.READ, feedBackoff, message, e);
    Step step = reopenAtCheckpoint(feedBackoff);
    feedBackoff = PartitionWorker.min(feedBackoff.multipliedBy(2), MAX_FEED_BACKOFF);
    return step;
  }

  /** Hands the batch to the handler: over the lanes with a concurrency above 1, else in order. */
  private Step deliver(List<ChangeEvent<D>> batch) {
    if (keyed != null && !batch.isEmpty()) {
      return keyed.deliver(batch);
    }
    pending.addAll(batch);
    return deliverPending();
  }

  /**
   * Delivers the pending changes one by one, each counted as processed once handled or parked,
   * committing per the policy as they go. RETRY_LATER when the handler failed on one and its next
   * attempt is due later: it and the rest stay pending.
   */
  private Step deliverPending() {
    Step step = Step.CONTINUE;
    while (!pending.isEmpty() && worker.running() && step == Step.CONTINUE) {
      if (!keeper.isValid()) {
        return Step.LOST;
      }
      ChangeEvent<D> event = pending.peekFirst();
      worker.progress().delivering(event.position());
      step = delivery.deliver(event, true);
      if (step == Step.RETRY_LATER) {
        return step;
      }
      pending.pollFirst();
      if (step == Step.CONTINUE) {
        checkpointer.processed(event.position(), 1);
      }
      worker.progress().processedTo(checkpointer.lastProcessed());
      if (step == Step.CONTINUE) {
        step = checkpointer.dueByCount() ? checkpointer.changesDue()
            : checkpointer.acknowledged(false); // flushes that completed meanwhile
      }
    }
    return step;
  }

  /**
   * Tells the status how far the partition is. After a read that found no change for it, the
   * cursor's progress (other partitions' changes, post-batch resume tokens) counts as processed
   * too: worth committing, so a restart does not re-scan it.
   */
  private void recordProgress(boolean readNothing) {
    if (readNothing && cursor != null) {
      Position p = cursor.position();
      if (p != null) {
        checkpointer.advancedTo(p);
      }
    }
    worker.progress().processedTo(checkpointer.lastProcessed(),
        pending.isEmpty() && cursor != null && cursor.caughtUp());
  }

  /** The source ended the stream: commit what was processed, report why, and end for good. */
  private PartitionState streamEnded() {
    Step step = checkpointer.checkpoint();
    if (step == Step.LOST || step == Step.FAILED) {
      return endOf(step);
    }
    Position at = cursor.position();
    worker.observer.streamEnded(worker.leaseName, at);
    String reason = cursor.endReason();
    worker.recordError(reason);
    log.warn("Partition {}: {}", worker.leaseName, reason);
    return PartitionState.ENDED;
  }

  /** How a step that is not CONTINUE ends the tenure: a stop commits first. */
  private PartitionState endWith(Step step) {
    return step == Step.STOPPING ? stopping() : endOf(step);
  }

  /** Stopped by close(): commit what was processed, then release in {@link #finish}. */
  private PartitionState stopping() {
    if (!ended && keeper.isValid() && cursor != null) {
      checkpointer.checkpoint();
    }
    return PartitionState.STOPPED;
  }

  private Step historyLostWhileReading(HistoryLostException e) {
    if (config.historyLost() == HistoryLostPolicy.STOP) {
      worker.observer.historyLost(worker.leaseName, e, null);
      worker.fail(e.getMessage() + " Policy STOP: partition stopped; no change was skipped.", e);
      return Step.FAILED;
    }
    // Re-open through open(), which skips to latest with its retries and records the gap.
    dropPending();
    checkpointer.backToCheckpoint();
    return open(e);
  }

  /** Forgets the rest of the last batch (the feed is read again from the checkpoint). */
  private void dropPending() {
    pending.clear();
    delivery.abandonRetry();
  }

  /** Reads a batch without holding the delivery lock, so close() can hand over meanwhile. */
  private List<ChangeEvent<D>> pollUnlocked() {
    FeedCursor<D> c = cursor;
    worker.deliveryLock.unlock();
    try {
      return c.poll(config.pollWait());
    } finally {
      worker.deliveryLock.lock();
      String side = c.sideFailure();
      if (side != null && !side.equals(sideFailure)) {
        worker.recordError(side);
      }
      sideFailure = side;
    }
  }

  /** The cursor's last {@link FeedCursor#sideFailure}, so that each is recorded once. */
  private String sideFailure;

  /** Tells the feed that everything up to {@code position} is committed (it may free what it kept). */
  void acknowledgeToFeed(Position position) {
    if (cursor != null) {
      cursor.acknowledge(position);
    }
  }

  private void closeCursor() {
    if (cursor != null) {
      try {
        cursor.close();
      } catch (RuntimeException e) {
        log.debug("Closing cursor of {} failed: {}", worker.leaseName, e.toString());
      }
      cursor = null;
    }
  }
}
