package dev.sluice.lease.internal;

import dev.sluice.SluiceException;
import dev.sluice.Ticker;
import dev.sluice.lease.HolderLiveness;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps one lease this process holds: the single set of rules behind listener partitions,
 * membership and locks (docs/adr/0016-one-lease-keeper.md).
 *
 * <p>Validity is judged twice: by the store's answer (a rejected renewal or a non-retryable store
 * error is a loss) and by a local deadline on the monotonic {@link Ticker}: the start of the last
 * successful request plus the lease duration, less a small margin. The store set its expiry from
 * its own clock when it received that request, so in real time its expiry is later than this
 * deadline; when renewals cannot get through (store unreachable, process paused) the holder stops
 * before the store could give the lease to anyone else (docs/adr/0002-clocks.md). A renewal that
 * returns after the local deadline is a loss even though the store accepted it: the lease may have
 * been someone else's in between.
 *
 * <p>The loss is reported <em>at</em> the local deadline, not when someone next asks: from
 * {@link #start()} a watchdog on {@link #WATCHDOG}, one daemon thread for the process that never
 * calls a store, marks the lease lost the moment the deadline passes, even while a renewal is still
 * waiting on a socket nobody answers (docs/adr/0100-loss-at-the-local-deadline.md). The loss
 * listener then runs on a thread of its own ({@link #NOTICES}), so a slow listener cannot delay
 * another lease's watchdog.
 *
 * <p>Where the store bounds a lease by a second condition ({@link LeaseStore#liveness}, such as
 * the SQL store's database session, docs/adr/0114-sql-lease-holder-session-liveness.md), the keeper stops
 * at whichever ends first, the same way: the watchdog watches both.
 *
 * <p>A loss at the local deadline says which way the renewal failed: sent and not answered, failed,
 * or never started (or sent late) because every thread of the scheduler was busy with other leases'
 * renewals (docs/adr/0132-renewal-threads-sized-for-the-stores-round-trip.md).
 */
public final class LeaseKeeper {
  private static final Logger LOG = LoggerFactory.getLogger(LeaseKeeper.class);

  /** A renewal sent later than this after it was due waited for a thread (or the process). */
  private static final long LATE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  private static final String BUSY = "every renewal thread was busy renewing other leases (more"
      + " leases than they renew in time at the store's round trip, or than the store client's"
      + " connection pool serves at once, ADR 0132) or this process was paused";

  /**
   * Marks leases lost at their local deadlines. One thread for every keeper of the process: its
   * tasks only compare the deadline with the ticker and set the keeper's state, so they never
   * wait for a store, and a renewal blocked on the network cannot hold it.
   */
  private static final ScheduledThreadPoolExecutor WATCHDOG = watchdog();

  /**
   * Runs the loss listeners of losses the watchdog found, in turn, on one thread for the process:
   * the number of threads stays fixed however many leases are lost at once (a listener of 1,000
   * partitions), and a slow listener delays other notices but never the watchdog, which has
   * already marked their leases lost.
   */
  private static final ExecutorService NOTICES = notices();

  private static ScheduledThreadPoolExecutor watchdog() {
    ScheduledThreadPoolExecutor pool = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "sluice-lease-deadline");
      t.setDaemon(true);
      return t;
    });
    pool.setRemoveOnCancelPolicy(true); // most watches are cancelled or moved by a renewal
    return pool;
  }

  private static ExecutorService notices() {
    return Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "sluice-lease-lost");
      t.setDaemon(true);
      return t;
    });
  }

  /** Told once, on a scheduler or caller thread, when the lease is lost. */
  @FunctionalInterface
  public interface LossListener {
    void onLost(Lease lease, SluiceException cause);
  }

  private final LeaseStore store;
  private final Duration duration;
  private final Duration renewEvery;
  private final long marginNanos;
  private final ScheduledExecutorService scheduler;
  private final Ticker ticker;
  private final LossListener onLost;
  /** The store's second condition for this lease (ADR 0114), or null: the deadline alone. */
  private final HolderLiveness liveness;
  private volatile Lease lease;
  private volatile long deadlineNanos;
  private volatile String lostReason;
  private volatile SluiceException lostCause;
  private volatile boolean retired;
  private ScheduledFuture<?> renewal;
  /** Whether a renewal is waiting for the store's answer now, and since when (ticker). */
  private volatile boolean renewing;
  private volatile long renewalSentNanos;
  /** When the next renewal is due (ticker): its scheduler starts it then if a thread is free. */
  private volatile long renewalDueNanos;
  /** The last failed renewal's error, or null once one gets through. */
  private volatile String lastFailure;
  /** The watchdog's task for the current deadline; guarded by {@code this}. */
  private ScheduledFuture<?> watch;

  public LeaseKeeper(LeaseStore store, Lease lease, long requestStartNanos, Duration duration,
      Duration renewEvery, ScheduledExecutorService scheduler, Ticker ticker, LossListener onLost) {
    this.store = Objects.requireNonNull(store, "store");
    this.lease = Objects.requireNonNull(lease, "lease");
    this.duration = Objects.requireNonNull(duration, "duration");
    this.renewEvery = Objects.requireNonNull(renewEvery, "renewEvery");
    this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
    this.ticker = Objects.requireNonNull(ticker, "ticker");
    this.onLost = Objects.requireNonNull(onLost, "onLost");
    this.marginNanos = Math.min(duration.toNanos() / 20, TimeUnit.MILLISECONDS.toNanos(500));
    this.deadlineNanos = requestStartNanos + duration.toNanos() - marginNanos;
    this.renewalDueNanos = requestStartNanos + renewEvery.toNanos();
    this.liveness = store.liveness(lease);
  }

  /** Starts renewing every {@code renewEvery} on the scheduler. */
  public synchronized void start() {
    if (retired || lostReason != null || renewal != null) {
      return;
    }
    long every = renewEvery.toNanos();
    renewalDueNanos = ticker.nanos() + every;
    renewal = scheduler.scheduleWithFixedDelay(this::renewOnce, every, every, TimeUnit.NANOSECONDS);
    watchDeadline();
  }

  /** Schedules the watchdog for the current deadline. Caller holds {@code this}. */
  private void watchDeadline() {
    if (retired || lostReason != null) {
      return;
    }
    long now = ticker.nanos();
    long until = deadlineNanos - now;
    if (liveness != null) {
      until = Math.min(until, liveness.remainingNanos());
    }
    long delay = Math.max(0, until);
    watch = WATCHDOG.schedule(this::deadlineReached, delay, TimeUnit.NANOSECONDS);
  }

  /**
   * The watchdog's task: marks the lease lost if its deadline passed or the store's liveness
   * condition ended, else (a renewal, a commit or a confirmation of liveness moved them meanwhile)
   * watches the new ones. Never calls the store.
   */
  private void deadlineReached() {
    String reason;
    synchronized (this) {
      if (retired || lostReason != null) {
        return;
      }
      long now = ticker.nanos();
      if (now - deadlineNanos >= 0) {
        reason = ranOut(now);
      } else if (livenessEnded()) {
        reason = liveness.lostReason();
      } else {
        watchDeadline();
        return;
      }
    }
    markLost(reason, null, true);
  }

  /** Whether the store's second condition for this lease (ADR 0114) has ended. */
  private boolean livenessEnded() {
    return liveness != null && liveness.remainingNanos() <= 0;
  }

  /** The local deadline on the ticker, as last computed. For status and tests. */
  public long deadlineNanos() {
    return deadlineNanos;
  }

  /**
   * Why the local deadline passed without a renewal, as far as this keeper can tell: a renewal
   * still waiting for the store, renewals that failed, or one that never started because every
   * renewal thread was busy with other leases (more leases than the threads renew at the store's
   * round trip) or the process did not run.
   */
  private String ranOut(long now) {
    String prefix = lossPrefix();
    if (renewing) {
      long sentLate = renewalSentNanos - renewalDueNanos;
      return prefix + "the renewal sent " + millis(now - renewalSentNanos) + " ago has not returned"
          + " (store slow or unreachable, or this process paused)"
          + (sentLate > LATE_NANOS ? "; it was sent " + millis(sentLate) + " after it was due: " + BUSY : "");
    }
    String failure = lastFailure;
    if (failure != null) {
      return failedUntilRanOut(failure);
    }
    long overdue = now - renewalDueNanos;
    if (overdue > 0) {
      return prefix + "the renewal due " + millis(overdue) + " ago had not started: " + BUSY;
    }
    return prefix + "this process was paused or starved of CPU";
  }

  private String lossPrefix() {
    return "not renewed before it ran out (lease " + duration + "): ";
  }

  private String failedUntilRanOut(String failure) {
    return lossPrefix() + "renewals failed until the local deadline passed: " + failure;
  }

  private static String millis(long nanos) {
    return TimeUnit.NANOSECONDS.toMillis(nanos) + " ms";
  }

  /** One renewal attempt; what the scheduler runs. Package-private for tests. */
  void renewOnce() {
    if (lostReason != null || retired) {
      return;
    }
    Lease current = lease;
    long start = ticker.nanos();
    if (start - deadlineNanos >= 0) {
      markLost(ranOut(start));
      return;
    }
    if (livenessEnded()) {
      markLost(liveness.lostReason());
      return;
    }
    renewalSentNanos = start;
    renewing = true;
    try {
      Lease renewed = store.renew(current, duration);
      if (ticker.nanos() - deadlineNanos >= 0) {
        // The store accepted, but our deadline passed while we waited (a pause, a slow store):
        // the lease may have been someone else's in between, so the holder must stop.
        markLost("the renewal returned after the local deadline (process paused or store slow"
            + " for longer than the lease of " + duration + ")");
        return;
      }
      lastFailure = null;
      extended(renewed, start);
    } catch (LeaseLostException e) {
      markLost(e.getMessage(), e);
    } catch (LeaseStoreException e) {
      if (!e.retryable()) {
        markLost("the store rejects renewals (retrying cannot help): " + e.getMessage(), e);
      } else {
        retryLater(current, e);
      }
    } catch (RuntimeException e) {
      retryLater(current, e);
    } finally {
      // The next is due a renewal interval from now (the scheduler's fixed delay); set before
      // renewing is cleared, so the watchdog never takes this renewal for one that did not start.
      renewalDueNanos = ticker.nanos() + renewEvery.toNanos();
      renewing = false;
    }
  }

  private void retryLater(Lease current, RuntimeException e) {
    lastFailure = e.toString();
    if (ticker.nanos() - deadlineNanos >= 0) {
      String reason = failedUntilRanOut(e.toString());
      LeaseLostException lost = new LeaseLostException(current.name(), current.epoch(), reason);
      lost.initCause(e);
      markLost(reason, lost);
    } else {
      LOG.warn("Renewal of lease '{}' failed, will retry until its local deadline: {}",
          current.name(), e.toString());
    }
  }

  /** Records a successful out-of-band renewal or commit whose request started at {@code requestStartNanos}. */
  public synchronized void extended(Lease renewed, long requestStartNanos) {
    if (lostReason != null) {
      return;
    }
    lease = renewed;
    long candidate = requestStartNanos + duration.toNanos() - marginNanos;
    if (candidate - deadlineNanos > 0) {
      deadlineNanos = candidate;
    }
  }

  /** Keeps the latest committed checkpoint in the lease value without touching the deadline. */
  public synchronized void checkpointed(Lease committed) {
    lease = lease.withCheckpoint(committed.checkpoint());
  }

  /** Marks the lease lost (once) and tells the loss listener. */
  public void markLost(String reason) {
    markLost(reason, null);
  }

  private void markLost(String reason, SluiceException cause) {
    markLost(reason, cause, false);
  }

  /**
   * Marks the lease lost (once): from here {@link #isValid()} is false. Tells the loss listener on
   * the calling thread, or with {@code elsewhere} on the {@link #NOTICES} thread (the watchdog's
   * thread must stay free for other leases' deadlines).
   */
  private void markLost(String reason, SluiceException cause, boolean elsewhere) {
    Lease current;
    SluiceException reported;
    synchronized (this) {
      if (lostReason != null || retired) {
        return;
      }
      current = lease;
      reported = cause != null ? cause
          : new LeaseLostException(current.name(), current.epoch(), reason);
      lostCause = reported;
      lostReason = reason;
      if (renewal != null) {
        renewal.cancel(false);
      }
      if (watch != null) {
        watch.cancel(false);
      }
    }
    LOG.warn("Lease '{}' epoch {} lost: {}", current.name(), current.epoch(), reason);
    Runnable tell = () -> {
      try {
        onLost.onLost(current, reported);
      } catch (Throwable t) {
        LOG.error("Reporting the loss of lease '{}' failed", current.name(), t);
      }
    };
    if (!elsewhere) {
      tell.run();
      return;
    }
    try {
      NOTICES.execute(tell);
    } catch (RejectedExecutionException e) {
      tell.run(); // cannot happen: the executor is never shut down; never drop a loss
    }
  }

  /**
   * Whether the holder may go on: not marked lost, the local deadline not passed, and the store's
   * liveness condition for it (if any) not ended.
   */
  public boolean isValid() {
    if (lostReason != null) {
      return false;
    }
    if (livenessEnded()) {
      if (!retired) {
        markLost(liveness.lostReason());
      }
      return false;
    }
    long now = ticker.nanos();
    if (now - deadlineNanos >= 0) {
      if (!retired) {
        markLost(ranOut(now));
      }
      return false;
    }
    return true;
  }

  /** The lease as last granted, renewed or committed. */
  public Lease lease() {
    return lease;
  }

  /** Why the lease was lost, or {@code null}. */
  public String lostReason() {
    return lostReason;
  }

  /** The exception describing the loss, or {@code null}. */
  public SluiceException lostCause() {
    return lostCause;
  }

  /**
   * Stops renewing and releases the lease in the store if it is still valid, so another owner can
   * take it at once. A failed release is logged: the lease then expires on its own.
   *
   * @return whether the store released it
   */
  public boolean release() {
    boolean valid = isValid();
    retire();
    if (!valid) {
      return false;
    }
    Lease current = lease;
    try {
      return store.release(current);
    } catch (RuntimeException e) {
      LOG.warn("Could not release lease '{}' (epoch {}); it will expire", current.name(),
          current.epoch(), e);
      return false;
    }
  }

  /**
   * Stops renewing without releasing, so a renewal still in flight cannot report a later release
   * or hand-over as a loss.
   *
   * @return the loss reason if the lease was already lost, else {@code null}
   */
  public synchronized String retire() {
    retired = true;
    if (renewal != null) {
      renewal.cancel(false);
    }
    if (watch != null) {
      watch.cancel(false);
    }
    return lostReason;
  }
}
