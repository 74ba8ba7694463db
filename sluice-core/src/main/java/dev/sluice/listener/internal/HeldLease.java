package dev.sluice.listener.internal;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import java.util.function.Consumer;
import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A lease this process holds, kept alive by periodic renewals on a scheduler thread so that a slow
 * handler cannot let it expire.
 *
 * <p>Validity is judged twice: the store's answer (a rejected renewal or commit marks it lost), and
 * a local deadline on the monotonic clock: the start of the last successful request plus the lease
 * duration, less a small margin. The store set its expiry from its own clock when it received that
 * request, so in real time its expiry is later than our deadline; when renewals cannot get through
 * (store unreachable, this process paused) we stop before the store could give the lease to anyone
 * else. See docs/adr/0002-clocks.md.
 */
final class HeldLease {
  private static final Logger log = LoggerFactory.getLogger(HeldLease.class);

  private final LeaseStore store;
  private final Duration duration;
  private final long marginNanos;
  private final Consumer<String> onLost;
  private volatile Lease lease;
  private volatile long deadlineNanos;
  private volatile String lostReason;
  private ScheduledFuture<?> renewal;
  private volatile boolean retired;

  HeldLease(LeaseStore store, Lease lease, long requestStartNanos, Duration duration, Consumer<String> onLost) {
    this.store = store;
    this.lease = lease;
    this.duration = duration;
    this.marginNanos = Math.min(duration.toNanos() / 20, TimeUnit.MILLISECONDS.toNanos(500));
    this.deadlineNanos = requestStartNanos + duration.toNanos() - marginNanos;
    this.onLost = onLost;
  }

  void startRenewing(ScheduledExecutorService scheduler, Duration every) {
    renewal = scheduler.scheduleWithFixedDelay(
        this::renewOnce, every.toNanos(), every.toNanos(), TimeUnit.NANOSECONDS);
  }

  private void renewOnce() {
    if (lostReason != null || retired) {
      return;
    }
    long start = System.nanoTime();
    if (start - deadlineNanos > 0) {
      markLost("no renewal succeeded before the local deadline (store unreachable or process paused)");
      return;
    }
    try {
      Lease renewed = store.renew(lease, duration);
      extend(renewed, start);
    } catch (LeaseLostException e) {
      markLost(e.getMessage());
    } catch (LeaseStoreException e) {
      if (!e.retryable()) {
        markLost("the store rejects renewals (retrying cannot help): " + e.getMessage());
      } else if (System.nanoTime() - deadlineNanos > 0) {
        markLost("renewals failed until the lease expired: " + e);
      } else {
        log.warn("Renewal of lease '{}' failed, will retry: {}", lease.name(), e.toString());
      }
    } catch (RuntimeException e) {
      // The store may be briefly unreachable: keep the lease while the local deadline allows.
      log.warn("Renewal of lease '{}' failed, will retry: {}", lease.name(), e.toString());
      if (System.nanoTime() - deadlineNanos > 0) {
        markLost("renewals failed until the lease expired: " + e);
      }
    }
  }

  /** Records a successful renewal or commit whose request started at {@code requestStartNanos}. */
  synchronized void extend(Lease updated, long requestStartNanos) {
    if (lostReason != null) {
      return;
    }
    lease = updated;
    long candidate = requestStartNanos + duration.toNanos() - marginNanos;
    if (candidate - deadlineNanos > 0) {
      deadlineNanos = candidate;
    }
  }

  /** Keeps the latest checkpoint in the lease value without touching the deadline. */
  synchronized void updateCheckpoint(Lease committed) {
    lease = lease.withCheckpoint(committed.checkpoint());
  }

  void markLost(String reason) {
    synchronized (this) {
      if (lostReason != null || retired) {
        return;
      }
      lostReason = reason;
    }
    log.warn("Lease '{}' epoch {} lost: {}", lease.name(), lease.epoch(), reason);
    try {
      onLost.accept(reason);
    } catch (Throwable t) {
      log.error("Reporting the loss of lease '{}' failed", lease.name(), t);
    }
  }

  /** Whether delivery may go on: not reported lost, and within the local deadline. */
  boolean valid() {
    if (lostReason != null) {
      return false;
    }
    if (System.nanoTime() - deadlineNanos > 0) {
      markLost("lease deadline passed without a successful renewal");
      return false;
    }
    return true;
  }

  String lostReason() {
    return lostReason;
  }

  Lease lease() {
    return lease;
  }

  /**
   * Stops renewing before the holder releases the lease, so a renewal still in flight cannot
   * report the release as a loss. Returns the loss reason if the lease was already lost.
   */
  synchronized String retire() {
    retired = true;
    if (renewal != null) {
      renewal.cancel(false);
    }
    return lostReason;
  }
}
