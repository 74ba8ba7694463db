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
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
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
 * partition, so a peer can take it.
 *
 * <p>It has no thread of its own (ADR 0075): it runs in turns on the listener's pool, one turn at a
 * time: an acquisition attempt, or one batch of its tenure. Between turns it waits without a
 * thread (until its next attempt, or until its parked cursor wakes it), so standbys and idle
 * partitions cost none, and a thousand partitions run on a few threads.
 */
final class PartitionWorker<D> {
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
   * Held by the thread running a turn of the tenure while it handles or commits, never while it
   * waits for the feed: {@link #stopAndHandOver} takes it to commit and release from the closing
   * thread, so a close never waits for a read in flight.
   */
  final ReentrantLock deliveryLock = new ReentrantLock();
  private final Object wakeUp = new Object();

  private volatile boolean running = true;
  private volatile PartitionState state = PartitionState.ACQUIRING;
  private volatile String error;
  private volatile Instant errorAt;
  /** What the status reports of the partition's progress; its tenures tell it. */
  private final PartitionProgress progress = new PartitionProgress();
  final SourceProbe source;
  /** The group-layout check, shared by the listener's partitions. */
  final LayoutCheck layout;
  private final AtomicLong processed = new AtomicLong();
  private final Deque<Long> losses = new ArrayDeque<>();
  private volatile int restarts;
  /** Failures in a row of what is being retried; see {@link PartitionStatus#attempts()}. */
  private volatile int attempts;
  private volatile Instant nextAttemptAt;
  private volatile Tenure<D> tenure;

  PartitionWorker(ListenerConfig<D> config, int index, ScheduledExecutorService scheduler,
      Assignment assignment, SourceProbe source, LifecycleLog lifecycle, LayoutCheck layout,
      ExecutorService lanes) {
    this.config = config;
    this.lanes = lanes;
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
    Position c = progress.committed();
    SourceHistory history = source.last();
    boolean held = s == PartitionState.ACTIVE || s == PartitionState.BLOCKED || s == PartitionState.RETRYING;
    Duration lag = held ? progress.lag(history) : Duration.ZERO;
    Duration historyLeft = null;
    if (held && c != null && c.time() != null && history.oldest() != null) {
      historyLeft = PartitionProgress.max(Duration.between(history.oldest(), c.time()), Duration.ZERO);
    }
    return new PartitionStatus(leaseName, s, progress.heldEpoch(), processed.get(), c, lag, error,
        errorAt, recentLosses(), restarts, historyLeft, attempts, nextAttemptAt);
  }

  /** The partition's progress, which its tenures tell as they go. */
  PartitionProgress progress() {
    return progress;
  }

  /** A change was handled (counted in the status). */
  void countProcessed() {
    processed.incrementAndGet();
  }

  /** Whether the partition may go on: false once the listener closes. */
  boolean running() {
    return running;
  }

  /**
   * The listener closes: the partition starts nothing more and its loops leave at their next
   * look ({@link #wake()} ends the waits; {@link #stopAndHandOver()} also hands the lease over).
   */
  void stop() {
    running = false;
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
   * the feed in flight (the turn in that read leaves when it returns).
   */
  void stopAndHandOver() {
    stop();
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

  /** Ends any wait: a pause inside a turn, and the wait between turns. */
  void wake() {
    synchronized (wakeUp) {
      wakeUp.notifyAll();
    }
    runNow();
  }

  /** The partition's cursor can make progress again (FeedCursor#wakeInsteadOfWaiting). */
  void cursorReady() {
    runNow();
  }

  /** Whether its next turn waits in the pool's queue for a thread (slow, not stalled). */
  boolean waitingForThread() {
    return turnState.get() == QUEUED;
  }

  /**
   * Ends the wait before the next acquisition attempt now (the lease store reported the partition
   * released): the attempt comes at once instead of at the end of the acquire interval.
   */
  void tryNow() {
    tryNowPending = true;
    if (waiting == Wait.ATTEMPT) {
      runNow();
    }
  }

  /** Whether its last attempt was refused for want of room under the quota (no store call made). */
  private volatile boolean waitingForRoom;

  /** Whether it waits for room under the quota: the assignment's refresh wakes it when there is some. */
  boolean waitingForRoom() {
    return waitingForRoom && tenure == null; // (a worker mid-turn: tryNow ends the wait it is about to begin)
  }

  /** Set by {@link #tryNow()}: the next wait before an attempt ends at once. */
  private volatile boolean tryNowPending;

  /**
   * Waits up to {@code d} inside a turn of {@code holding} (a back-off between store or feed
   * retries), returning early on stop or when its lease is lost. Interrupts do not stop the
   * partition (handler code may leave the flag set): only {@link #stopAndHandOver} does.
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
        while (running && holding.keeper().lostReason() == null) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            return;
          }
          try {
            TimeUnit.NANOSECONDS.timedWait(wakeUp, left);
          } catch (InterruptedException e) {
            log.warn("Partition {}: its thread was interrupted; ignored (close the listener"
                + " to stop it)", leaseName);
          }
        }
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

  /**
   * What a held partition retries: reading (the feed and what it needs first), committing, or
   * parking a change in the dead-letter store.
   */
  enum Retried { READ, COMMIT, PARK, HANDLE }

  /** What the failures counted in {@link #attempts} were of; null when nothing is retried. */
  private volatile Retried retried;

  /**
   * A transient failure of what a held partition needs to go on, tried again after {@code
   * backoff}: RETRYING, with the error, the attempt count and when the next try is.
   */
  void retrying(Retried what, Duration backoff, String message, Throwable cause) {
    recordError(message + ": " + withCauses(cause));
    if (retried != what) {
      attempts = 0;
    }
    retried = what;
    attempts++;
    nextAttemptAt = Instant.now().plus(backoff);
    setState(PartitionState.RETRYING);
  }

  /**
   * The handler failed on a change that is tried again in place after {@code backoff} ({@code
   * attempt} counts that change's failures): RETRYING with the error, or BLOCKED once the retry
   * policy's attempts are used up and the partition waits on the change for good. A handler's
   * write to MongoDB (a view, a fenced write) failing on a failover shows here like a read would.
   */
  void handlerRetrying(int attempt, Duration backoff, String message, Throwable cause, boolean blocked) {
    recordError(message + ": " + withCauses(cause));
    retried = Retried.HANDLE;
    attempts = attempt;
    nextAttemptAt = Instant.now().plus(backoff);
    if (!blocked && state != PartitionState.BLOCKED) {
      setState(PartitionState.RETRYING);
    }
  }

  /**
   * {@code e} and what caused it, for a status line: a driver's own exception (a client-side
   * timeout, a retry that gave up) often carries the server's answer, with its code, only as its
   * cause.
   */
  static String withCauses(Throwable e) {
    StringBuilder b = new StringBuilder(String.valueOf(e));
    int depth = 0;
    for (Throwable c = e == null ? null : e.getCause(); c != null && c != e && depth < 3; c = c.getCause()) {
      if (b.indexOf(String.valueOf(c.getMessage())) < 0) {
        b.append(" (caused by ").append(c).append(')');
      }
      depth++;
    }
    return b.toString();
  }

  /** {@code what} succeeded: if it was being retried, the partition is ACTIVE again. */
  void attemptSucceeded(Retried what) {
    if (retried != what) {
      return;
    }
    retried = null;
    attempts = 0;
    nextAttemptAt = null;
    if (state == PartitionState.RETRYING) {
      setState(PartitionState.ACTIVE);
    }
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
   * instance's share at once, not when its turn gets back from a slow read.
   */
  void leaseLost(Lease lease, String reason) {
    assignment.released(partition.index());
    synchronized (losses) {
      losses.addLast(System.nanoTime());
    }
    recordError(reason);
    progress.notHolding();
    setState(PartitionState.LOST);
    observer.lost(leaseName, lease.epoch(), reason);
    wake();
  }

  /** The listener's lanes for a concurrency above 1, or null. */
  private final ExecutorService lanes;

  /** The lanes of a listener with a concurrency above 1 (shared by its partitions). */
  ExecutorService lanes() {
    return lanes;
  }

  // ---- Turns: how a partition runs on the listener's few threads (ADR 0075) ----

  /** What a turn asks for next. */
  private record Next(long delayNanos, Wait kind, boolean done) {
    static final Next NOW = new Next(0, Wait.NONE, false);
    static final Next DONE = new Next(0, Wait.NONE, true);

    static Next after(Duration d, Wait kind) {
      return new Next(Math.max(0, d.toNanos()), kind, false);
    }
  }

  /** Why a partition waits between turns: what may end the wait early (a stop always does). */
  private enum Wait {
    NONE,
    /** Until its next acquisition attempt: {@link #tryNow()} too. */
    ATTEMPT,
    /**
     * A pause after a tenure or an unexpected error, or a failed change's back-off: a stop or a
     * lost lease ends it, a release notice does not.
     */
    PAUSE,
    /** Its cursor parked: the cursor's wake, a lost lease, or the poll wait, whichever first. */
    PARKED
  }

  private static final int IDLE = 0;
  private static final int QUEUED = 1;
  private static final int RUNNING = 2;
  /** Running, and asked to run again as soon as this turn ends. */
  private static final int AGAIN = 3;
  private static final int FINISHED = 4;

  private final AtomicInteger turnState =
      new AtomicInteger(IDLE);
  private volatile Wait waiting = Wait.NONE;
  private ScheduledFuture<?> timer;
  private final CountDownLatch finished = new CountDownLatch(1);
  private Executor turns;
  private ScheduledExecutorService timers;
  private Duration restartDelay = FIRST_RESTART_DELAY;

  /**
   * Starts competing: turns run on {@code turns}, timed waits between them on {@code timers}
   * (whose tasks only submit a turn, so one thread serves every partition).
   */
  void start(Executor turns, ScheduledExecutorService timers) {
    this.turns = turns;
    this.timers = timers;
    runNow();
  }

  /** Runs a turn as soon as a thread is free; if one is running, another right after it. */
  void runNow() {
    while (true) {
      int s = turnState.get();
      if (s == IDLE) {
        if (turnState.compareAndSet(IDLE, QUEUED)) {
          submit();
          return;
        }
      } else if (s == RUNNING) {
        if (turnState.compareAndSet(RUNNING, AGAIN)) {
          return;
        }
      } else {
        return; // queued, already asked again, or finished
      }
    }
  }

  private void submit() {
    try {
      turns.execute(this::turn);
    } catch (RejectedExecutionException closed) {
      end(); // the listener shut its threads down
    }
  }

  /** Whether the partition will run no more turns (the listener waits for it on close). */
  boolean awaitFinished(long millis) throws InterruptedException {
    return finished.await(millis, TimeUnit.MILLISECONDS);
  }

  private void end() {
    turnState.set(FINISHED);
    finished.countDown();
  }

  private void turn() {
    turnState.set(RUNNING);
    ScheduledFuture<?> t = timer;
    if (t != null) {
      t.cancel(false);
      timer = null;
    }
    if (waiting == Wait.ATTEMPT) {
      tryNowPending = false; // this is the attempt it asked for
    }
    waiting = Wait.NONE;
    Next next;
    try {
      next = tenure == null ? competeTurn() : holdTurn();
      restartDelay = FIRST_RESTART_DELAY;
    } catch (Throwable e) {
      next = unexpected(e);
    }
    if (next.done()) {
      end();
      return;
    }
    if (next.kind() == Wait.ATTEMPT && tryNowPending) {
      tryNowPending = false;
      next = Next.NOW;
    }
    if (next.delayNanos() == 0) {
      turnState.set(QUEUED);
      submit();
      return;
    }
    waiting = next.kind();
    try {
      timer = timers.schedule(this::runNow, next.delayNanos(), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      end();
      return;
    }
    if (!turnState.compareAndSet(RUNNING, IDLE)) {
      // Asked to run again during the turn (a wake, a stop): do, now.
      turnState.set(QUEUED);
      submit();
    }
  }

  /** Nothing may end a partition silently: record, release (the tenure did), restart with back-off. */
  private Next unexpected(Throwable e) {
    Tenure<D> t = tenure;
    if (t != null) {
      endTenure(); // released by the tenure's turn as it failed
    }
    // The error first: whoever sees the restart count move also sees its cause.
    recordError("partition restarted after an unexpected error: " + e);
    restarts++;
    log.error("Partition {} ({}): unexpected error, restarting in {}", leaseName,
        config.owner(), restartDelay, e);
    setState(PartitionState.ACQUIRING);
    Duration d = restartDelay;
    restartDelay = min(restartDelay.multipliedBy(2), MAX_RESTART_DELAY);
    return running ? Next.after(d, Wait.PAUSE) : stopped();
  }

  private Next stopped() {
    setState(PartitionState.STOPPED);
    return Next.DONE;
  }

  /** One acquisition attempt, within the share; on success the tenure's first turn at once. */
  private Next competeTurn() {
    if (!running) {
      return stopped();
    }
    setState(PartitionState.ACQUIRING);
    waitingForRoom = !assignment.reserve(partition.index());
    if (waitingForRoom) {
      // Refused for want of room under the quota: a refresh that makes room wakes it (tryNow).
      return Next.after(jitter(config.acquireInterval()), Wait.ATTEMPT);
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
        return Next.DONE; // for good; a peer may take the partition
      }
      lease = unreachable(e);
    } catch (RuntimeException e) {
      lease = unreachable(e);
    }
    if (lease.isEmpty()) {
      assignment.unreserve(partition.index());
      if (heldElsewhere) {
        acquisitionAnswered();
        return Next.after(untilNextAttempt(), Wait.ATTEMPT);
      }
      Duration next = jitter(config.acquireInterval());
      nextAttemptAt = Instant.now().plus(next);
      return Next.after(next, Wait.ATTEMPT);
    }
    acquisitionAnswered();
    assignment.acquired(partition.index());
    tenure = new Tenure<>(this, lease.get(), requestStart);
    return holdTurn();
  }

  /** An acquisition attempt that did not reach the lease store: recorded, and tried again. */
  private Optional<Lease> unreachable(RuntimeException e) {
    log.warn("Cannot reach the lease store to acquire '{}': {}", leaseName, e.toString());
    recordError("cannot reach the lease store to acquire '" + leaseName + "': " + e);
    retried = null;
    attempts++;
    return Optional.empty();
  }

  /** The lease store answered an acquisition attempt: nothing is being retried any more. */
  private void acquisitionAnswered() {
    attempts = 0;
    nextAttemptAt = null;
  }

  /** One turn of the tenure; when it ended, what comes after it. */
  private Next holdTurn() {
    Tenure<D> t = tenure;
    PartitionState end = t.turn();
    if (end == null) {
      Duration retry = t.retryIn();
      if (retry != null) {
        return Next.after(retry, Wait.PAUSE); // a failed change's back-off, without a thread
      }
      return t.cursorParked() ? Next.after(config.pollWait(), Wait.PARKED) : Next.NOW;
    }
    endTenure();
    if (end == PartitionState.FAILED || end == PartitionState.ENDED) {
      setState(end);
      return Next.DONE; // for good; the lease was released so a peer may take the partition
    }
    if (!running) {
      return stopped();
    }
    // Lost, or handed back to balance the cluster: compete again later, within the share.
    return Next.after(jitter(config.acquireInterval()), Wait.PAUSE);
  }

  private void endTenure() {
    tenure = null;
    progress.notHolding();
    assignment.released(partition.index());
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
