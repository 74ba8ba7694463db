package dev.sluice.listener.internal;

import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.SourceHistory;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One partition inside one listener: competes for its lease within the fair share, runs a
 * {@link Tenure} while it holds it, and supervises: whatever escapes a tenure (an engine bug, an
 * {@link Error}) is recorded in the status, the lease is released, and the partition is restarted
 * with back-off. It ends only when the listener closes or the partition failed for good ({@link
 * PartitionState#FAILED}, {@link PartitionState#ENDED}), and then it no longer claims the
 * partition, so a peer can take it. Runs on its own thread.
 */
final class PartitionWorker<D> implements Runnable {
  private static final Logger log = LoggerFactory.getLogger(PartitionWorker.class);
  private static final Duration FIRST_RESTART_DELAY = Duration.ofMillis(500);
  private static final Duration MAX_RESTART_DELAY = Duration.ofSeconds(30);

  final ListenerConfig<D> config;
  final PartitionSpec partition;
  final String leaseName;
  final ScheduledExecutorService scheduler;
  final ListenerObserver observer;
  final Assignment assignment;
  /**
   * Held by the worker thread while it handles or commits, never while it waits for the feed:
   * {@link #stopAndHandOver} takes it to commit and release from the closing thread, so a close
   * never waits for a read in flight.
   */
  final ReentrantLock deliveryLock = new ReentrantLock();
  private final Object wakeUp = new Object();

  volatile boolean running = true;
  private volatile PartitionState state = PartitionState.ACQUIRING;
  private volatile String error;
  private volatile Instant errorAt;
  volatile long heldEpoch;
  volatile Position committed;
  volatile Position newestRead;
  /** The position of the last change processed by the current tenure (or the cursor's progress). */
  volatile Position processedTo;
  /** Whether the current tenure processed everything the source had at its last read. */
  volatile boolean caughtUp;
  final SourceProbe source;
  /** The group-layout check, shared by the listener's partitions. */
  final LayoutCheck layout;
  final AtomicLong processed = new AtomicLong();
  private final Deque<Long> losses = new ArrayDeque<>();
  private volatile int restarts;
  private volatile Tenure<D> tenure;

  PartitionWorker(ListenerConfig<D> config, int index, ScheduledExecutorService scheduler,
      Assignment assignment, SourceProbe source, LifecycleLog lifecycle, LayoutCheck layout) {
    this.config = config;
    this.layout = layout;
    this.source = source;
    this.assignment = assignment;
    this.partition = new PartitionSpec(index, config.partitions());
    this.leaseName = config.leaseName(index);
    this.scheduler = scheduler;
    this.observer = ListenerObserver.composite(lifecycle, config.observer());
  }

  String leaseName() {
    return leaseName;
  }

  PartitionStatus status() {
    PartitionState s = state;
    Position c = committed;
    SourceHistory history = source.last();
    boolean held = s == PartitionState.ACTIVE || s == PartitionState.BLOCKED;
    Duration lag = held ? lag(history) : Duration.ZERO;
    Duration historyLeft = null;
    if (held && c != null && c.time() != null && history.oldest() != null) {
      historyLeft = max(Duration.between(history.oldest(), c.time()), Duration.ZERO);
    }
    return new PartitionStatus(leaseName, s, heldEpoch, processed.get(), c, lag, error,
        errorAt, recentLosses(), restarts, historyLeft);
  }

  /**
   * The newest change the source has (as it last said, or as read, whichever is newer) minus the
   * last change processed; zero once everything the source had at the last read is processed.
   */
  private Duration lag(SourceHistory history) {
    Position p = processedTo;
    if (caughtUp || p == null || p.time() == null) {
      return Duration.ZERO;
    }
    Instant newest = history.newest();
    Position n = newestRead;
    if (n != null && n.time() != null && (newest == null || n.time().isAfter(newest))) {
      newest = n.time();
    }
    return newest == null ? Duration.ZERO : max(Duration.between(p.time(), newest), Duration.ZERO);
  }

  private static Duration max(Duration a, Duration b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  private int recentLosses() {
    synchronized (losses) {
      long horizon = System.nanoTime() - PartitionStatus.RECENT.toNanos();
      while (!losses.isEmpty() && losses.peekFirst() - horizon < 0) {
        losses.pollFirst();
      }
      return losses.size();
    }
  }

  /**
   * Stops the partition and hands its lease over at once: waits for the handler call in progress
   * (if any), commits what was processed and releases the lease, without waiting for a read of
   * the feed in flight (the worker thread leaves when that read returns).
   */
  void stopAndHandOver() {
    running = false;
    wake();
    Tenure<D> t = tenure;
    if (t != null) {
      t.handOverFromOutside();
    }
  }

  /** Whether this worker still holds or may touch its lease (for close() to wait on). */
  boolean holdsLease() {
    Tenure<D> t = tenure;
    return t != null && !t.ended();
  }

  void wake() {
    synchronized (wakeUp) {
      wakeUp.notifyAll();
    }
  }

  /** Set by {@link #tryNow()}: the next acquisition pause ends at once. Guarded by {@code wakeUp}. */
  private boolean tryNow;

  /**
   * Ends the pause between acquisition attempts now (the lease store reported the partition
   * released): the next attempt comes at once instead of at the end of the acquire interval.
   */
  void tryNow() {
    synchronized (wakeUp) {
      tryNow = true;
      wakeUp.notifyAll();
    }
  }

  /** The pause between acquisition attempts: {@link #pause}, ended early by {@link #tryNow()}. */
  private void pauseBeforeNextAttempt(Duration d) {
    long deadline = System.nanoTime() + d.toNanos();
    synchronized (wakeUp) {
      awaitWakeUp(deadline, () -> tryNow);
      tryNow = false;
    }
  }

  /**
   * Waits on {@code wakeUp} until {@code deadline}, a stop, or {@code ended}; the caller holds
   * {@code wakeUp}. Interrupts do not end it (handler code may leave the flag set).
   */
  private void awaitWakeUp(long deadline, java.util.function.BooleanSupplier ended) {
    while (running && !ended.getAsBoolean()) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return;
      }
      try {
        TimeUnit.NANOSECONDS.timedWait(wakeUp, left);
      } catch (InterruptedException e) {
        log.warn("Partition {}: the worker thread was interrupted; ignored (close the listener"
            + " to stop it)", leaseName);
      }
    }
  }

  /**
   * Waits up to {@code d}, returning early on stop or when {@code lost} says the lease is gone.
   * Interrupts do not stop the partition (handler code may leave the flag set): only {@link
   * #stopAndHandOver} does.
   */
  void pause(Duration d, Tenure<D> holding) {
    long deadline = System.nanoTime() + d.toNanos();
    boolean unlocked = false;
    if (deliveryLock.isHeldByCurrentThread()) {
      deliveryLock.unlock(); // let a closing thread hand over while we wait
      unlocked = true;
    }
    try {
      synchronized (wakeUp) {
        awaitWakeUp(deadline, () -> holding != null && holding.keeper().lostReason() != null);
      }
    } finally {
      if (unlocked) {
        deliveryLock.lock();
      }
    }
  }

  void setState(PartitionState next) {
    PartitionState prev = state;
    if (prev != next) {
      state = next;
      log.debug("Partition {} ({}): {} -> {}", leaseName, config.owner(), prev, next);
      observer.stateChanged(leaseName, prev, next);
    }
  }

  PartitionState state() {
    return state;
  }

  void recordError(String message) {
    error = message;
    errorAt = Instant.now();
  }

  /** Records why the partition stops for good and moves it to FAILED. */
  void fail(String message, Throwable cause) {
    recordError(message);
    log.error("Partition {} FAILED: {}", leaseName, message, cause);
    setState(PartitionState.FAILED);
  }

  /**
   * Called once per tenure, the moment its lease is known lost (by the renewal thread, or by the
   * worker when a commit or renewal was rejected): the partition stops counting toward this
   * instance's share at once, not when the worker thread gets back from a slow read.
   */
  void leaseLost(Lease lease, String reason) {
    assignment.released(partition.index());
    synchronized (losses) {
      losses.addLast(System.nanoTime());
    }
    recordError(reason);
    heldEpoch = 0;
    setState(PartitionState.LOST);
    observer.lost(leaseName, lease.epoch(), reason);
    wake();
  }

  /** The threads that handle changes with a concurrency above 1; created on first use. */
  private java.util.concurrent.ThreadPoolExecutor lanes;

  /**
   * The lanes of a listener with a concurrency above 1: that many threads at most, which end after
   * a minute idle (a standby partition holds none) and when the worker ends.
   */
  synchronized java.util.concurrent.ExecutorService lanes() {
    if (lanes == null) {
      int k = config.concurrency();
      java.util.concurrent.atomic.AtomicInteger n = new java.util.concurrent.atomic.AtomicInteger();
      lanes = new java.util.concurrent.ThreadPoolExecutor(k, k, 1, TimeUnit.MINUTES,
          new java.util.concurrent.LinkedBlockingQueue<>(), r -> {
            Thread t = new Thread(r, "sluice-" + leaseName + "-lane-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
          });
      lanes.allowCoreThreadTimeOut(true);
    }
    return lanes;
  }

  private synchronized void shutDownLanes() {
    if (lanes != null) {
      lanes.shutdown(); // nothing is in flight: a batch is waited for before its tenure ends
    }
  }

  @Override
  public void run() {
    try {
      compete();
    } finally {
      shutDownLanes();
    }
  }

  private void compete() {
    Duration restartDelay = FIRST_RESTART_DELAY;
    while (running) {
      PartitionState end;
      try {
        end = competeOnce();
        restartDelay = FIRST_RESTART_DELAY;
      } catch (Throwable t) {
        // Nothing may end a partition silently: record, release (the tenure did), restart.
        // The error first: whoever sees the restart count move also sees its cause.
        recordError("partition restarted after an unexpected error: " + t);
        restarts++;
        log.error("Partition {} ({}): unexpected error, restarting in {}", leaseName,
            config.owner(), restartDelay, t);
        setState(PartitionState.ACQUIRING);
        pause(restartDelay, null);
        restartDelay = min(restartDelay.multipliedBy(2), MAX_RESTART_DELAY);
        continue;
      }
      if (end == PartitionState.FAILED || end == PartitionState.ENDED) {
        setState(end);
        return; // for good; the lease was released so a peer may take the partition
      }
    }
    setState(PartitionState.STOPPED);
  }

  /** One round: acquire if within the share, hold until the tenure ends. */
  private PartitionState competeOnce() {
    setState(PartitionState.ACQUIRING);
    if (!assignment.reserve(partition.index())) {
      pauseBeforeNextAttempt(jitter(config.acquireInterval()));
      return null;
    }
    long requestStart = System.nanoTime();
    Optional<Lease> lease;
    boolean heldElsewhere = false;
    try {
      lease = config.leaseStore().tryAcquire(leaseName, config.owner(), config.leaseDuration());
      heldElsewhere = lease.isEmpty();
    } catch (LeaseStoreException e) {
      if (!e.retryable()) {
        assignment.unreserve(partition.index());
        fail("the lease store rejects acquiring '" + leaseName + "' (retrying cannot help): "
            + e.getMessage(), e);
        return PartitionState.FAILED;
      }
      log.warn("Cannot reach the lease store to acquire '{}': {}", leaseName, e.toString());
      lease = Optional.empty();
    } catch (RuntimeException e) {
      log.warn("Cannot reach the lease store to acquire '{}': {}", leaseName, e.toString());
      lease = Optional.empty();
    }
    if (lease.isEmpty()) {
      assignment.unreserve(partition.index());
      pauseBeforeNextAttempt(heldElsewhere ? untilNextAttempt() : jitter(config.acquireInterval()));
      return null;
    }
    assignment.acquired(partition.index());
    Tenure<D> t = new Tenure<>(this, lease.get(), requestStart);
    PartitionState end;
    try {
      tenure = t;
      end = t.run();
    } finally {
      tenure = null;
      heldEpoch = 0;
      assignment.released(partition.index());
    }
    if (end == PartitionState.FAILED || end == PartitionState.ENDED) {
      return end;
    }
    if (running) {
      // Lost, or handed back to balance the cluster: compete again later, within the share.
      pause(jitter(config.acquireInterval()), null);
    }
    return null;
  }

  /** How far past a holder's expiry the next attempt comes, at least (store round trips, clock steps). */
  static final Duration EXPIRY_MARGIN = Duration.ofMillis(5);
  /** Spread of attempts past an expiry, so that several standbys do not all ask at one instant. */
  static final Duration EXPIRY_SPREAD = Duration.ofMillis(50);

  /**
   * The pause after an attempt that found the lease held (ADR 0068): the acquire interval (with
   * jitter), or less when the holder's lease expires sooner, judged on the store's clock (its
   * expiry minus the store's time when the record was read): the next attempt then comes just
   * past the expiry, so a crashed holder is replaced about when its lease ends, not up to an acquire
   * interval later. A holder that renews in the meantime moves its expiry, and that attempt finds
   * the lease held again. The record is read once per such attempt; when it cannot be read, the
   * acquire interval.
   */
  private Duration untilNextAttempt() {
    Duration regular = jitter(config.acquireInterval());
    Optional<LeaseRecord> record;
    try {
      record = config.leaseStore().read(leaseName);
    } catch (RuntimeException e) {
      return regular;
    }
    if (record.isEmpty() || record.get().expiresAt() == null) {
      return regular; // released meanwhile: the release notice, or the interval, brings the next attempt
    }
    Duration left = Duration.between(record.get().storeTime(), record.get().expiresAt());
    Duration atExpiry = (left.isNegative() ? Duration.ZERO : left).plus(EXPIRY_MARGIN)
        .plusNanos(ThreadLocalRandom.current().nextLong(EXPIRY_SPREAD.toNanos() + 1));
    return min(atExpiry, regular);
  }

  static Duration jitter(Duration d) {
    long n = d.toNanos();
    return Duration.ofNanos(n / 2 + ThreadLocalRandom.current().nextLong(n / 2 + 1));
  }

  static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }
}
