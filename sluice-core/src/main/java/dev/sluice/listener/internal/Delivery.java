package dev.sluice.listener.internal;

import dev.sluice.SluiceException;
import dev.sluice.deadletter.StaleParkException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.UndecodableChange;
import dev.sluice.feed.UndecodableChangeException;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.listener.StaleFenceException;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hands one change to the handler and applies the failure policy: retry with back-off in place,
 * then park it (and every later change of its key) or block the partition. Every {@link
 * Throwable} the handler throws goes through the policy, an {@link Error} too: a handler that
 * fails with an AssertionError or runs out of memory on one huge document must not end the
 * partition silently.
 */
final class Delivery<D> {
  private static final Logger log = LoggerFactory.getLogger(Delivery.class);

  private final Tenure<D> tenure;
  private final PartitionWorker<D> worker;

  Delivery(Tenure<D> tenure) {
    this.tenure = tenure;
    this.worker = tenure.worker;
  }

  /**
   * Delivers {@code event}; CONTINUE once it was handled or parked (the caller then counts it as
   * processed). Between attempts it waits in place. Thread-safe for changes of different keys
   * (listener concurrency above 1).
   */
  Step deliver(ChangeEvent<D> event) {
    return deliver(event, false);
  }

  /** The change the sequential feed loop retries later, or null; its next attempt, its state, when. */
  private ChangeEvent<D> retrying;
  private int retryAttempt;
  private boolean retryBlocking;
  private long retryAtNanos;
  private Duration retryIn;

  /** After {@link Step#RETRY_LATER}: how long until the change's next attempt. */
  Duration retryIn() {
    return retryIn;
  }

  /**
   * As {@link #deliver(ChangeEvent)}; with {@code yieldBetweenAttempts} (the sequential feed loop,
   * ADR 0075) a failed attempt returns {@link Step#RETRY_LATER} instead of waiting for the next
   * one, and the caller hands the same change back later: the back-off holds no thread.
   */
  Step deliver(ChangeEvent<D> event, boolean yieldBetweenAttempts) {
    FailurePolicy policy = tenure.config.failure();
    RetryPolicy retry = policy.retry();
    int attempt = 1;
    boolean blocking = false;
    if (retrying != null && retrying != event) {
      abandonRetry(); // the feed was rewound: the change comes again as a new delivery
    }
    if (retrying == event) {
      long left = retryAtNanos - System.nanoTime();
      if (left > 0) {
        retryIn = Duration.ofNanos(left); // woken early (a read, a timer): not yet
        return Step.RETRY_LATER;
      }
      attempt = retryAttempt;
      blocking = retryBlocking;
      retrying = null;
    } else if (policy instanceof FailurePolicy.Park<?>) {
      Step behind = parkedBehind(event);
      if (behind != null) {
        return behind;
      }
    }
    while (true) {
      // The last look before the handler: the callers checked before the parked-key lookup and
      // the back-off, which may have taken long enough for the local deadline to pass
      // (docs/adr/0100-loss-at-the-local-deadline.md).
      if (!tenure.keeper().isValid()) {
        return Step.LOST;
      }
      long start = System.nanoTime();
      Throwable failure;
      try {
        if (event.raw() instanceof UndecodableChange undecodable) {
          throw new UndecodableChangeException(event, undecodable);
        }
        tenure.config.handler().handle(event, tenure.fence);
        clearInterrupt(event);
        worker.countProcessed();
        worker.observer.delivered(event, System.nanoTime() - start);
        if (blocking) {
          unblocked();
        }
        // Also after a first attempt: a change retried in place may have been abandoned (the feed
        // rewound) and come again as a new delivery.
        worker.attemptSucceeded(PartitionWorker.Retried.HANDLE);
        return Step.CONTINUE;
      } catch (StaleFenceException e) {
        clearInterrupt(event);
        if (!stillHeld()) {
          tenure.keeper().markLost(e.getMessage());
          return Step.LOST;
        }
        // The lease is ours: the target was written under another lease (another stream or
        // group writes it, or its key moved partition). Re-acquiring would be rejected again.
        failure = new SluiceException("A fenced write was rejected although this listener still"
            + " holds lease '" + tenure.fence.lease() + "' with epoch " + tenure.fence.epoch()
            + ": the target is written under another lease too, so epochs of different leases"
            + " are compared; scope the fence per lease (FencedWrites does) or give each target"
            + " one writer. Cause: " + e.getMessage(), e);
      } catch (Throwable e) {
        clearInterrupt(event);
        failure = e;
      }
      worker.observer.handlerFailed(event, attempt, failure);
      if (attempt >= retry.maxAttempts() && policy instanceof FailurePolicy.Park<?>) {
        worker.attemptSucceeded(PartitionWorker.Retried.HANDLE); // parked: no longer retried
        return park(event, describe(failure), attempt);
      }
      Duration delay = retry.delayAfter(Math.min(attempt, 64));
      if (attempt >= retry.maxAttempts()) {
        // The error first, then the state: whoever sees BLOCKED (a health check, the lifecycle
        // log) sees why.
        worker.handlerRetrying(attempt, delay, "blocked on change " + event.id() + " of key " + event.key()
            + " after " + attempt + " attempts", failure, true);
        if (!blocking) {
          blocking = true;
          blocked();
        }
      } else {
        worker.handlerRetrying(attempt, delay, "the handler failed on change " + event.id() + " of key "
            + event.key() + " (attempt " + attempt + " of " + retry.maxAttempts() + ")", failure, false);
      }
      log.warn("Handler failed on {} (attempt {}{}), retrying in {}: {}", event, attempt,
          attempt >= retry.maxAttempts() ? ", blocking the partition until it succeeds" : "",
          delay, describe(failure));
      if (yieldBetweenAttempts) {
        retrying = event;
        retryAttempt = attempt + 1;
        retryBlocking = blocking;
        retryAtNanos = System.nanoTime() + delay.toNanos();
        retryIn = delay;
        return Step.RETRY_LATER;
      }
      Step interrupted = waitToRetry(delay);
      if (interrupted != null) {
        return interrupted; // not processed: the next owner gets it again from the checkpoint
      }
      attempt++;
    }
  }

  /** Forgets the change waiting for its next attempt; the partition is no longer blocked on it. */
  void abandonRetry() {
    if (retrying != null && retryBlocking) {
      unblocked();
    }
    retrying = null;
  }

  /** Parks {@code event} behind an earlier parked change of its key, or returns null. */
  private Step parkedBehind(ChangeEvent<D> event) {
    Duration backoff = Duration.ofMillis(100);
    while (true) {
      try {
        boolean blocked = tenure.parked.blocks(event.key());
        worker.attemptSucceeded(PartitionWorker.Retried.PARK);
        if (!blocked) {
          return null;
        }
        return park(event, "parked behind an earlier parked change of key " + event.key(), 0);
      } catch (RuntimeException e) {
        log.warn("Cannot ask the dead-letter store whether key {} is parked, retrying: {}",
            event.key(), e.toString());
        worker.retrying(PartitionWorker.Retried.PARK, backoff,
            "cannot ask the dead-letter store whether key " + event.key() + " is parked", e);
        Step interrupted = waitToRetry(backoff);
        if (interrupted != null) {
          return interrupted;
        }
        backoff = PartitionWorker.min(backoff.multipliedBy(2), Tenure.MAX_FEED_BACKOFF);
      }
    }
  }

  private Step park(ChangeEvent<D> event, String reason, int attempts) {
    Duration backoff = Duration.ofMillis(100);
    while (true) {
      try {
        tenure.parked.park(event, tenure.fence.epoch(), reason, attempts);
        worker.attemptSucceeded(PartitionWorker.Retried.PARK);
        break;
      } catch (StaleParkException e) {
        // A later owner has parked in this partition: the lease is gone, whatever our deadline
        // says. The change is not lost: the new owner reads it again from the checkpoint.
        tenure.keeper().markLost(e.getMessage());
        return Step.LOST;
      } catch (RuntimeException e) {
        // Never skip a change we could not park: retry until it is durable or the lease is gone.
        log.warn("Parking {} failed, retrying: {}", event, e.toString());
        worker.retrying(PartitionWorker.Retried.PARK, backoff, "parking the change of key " + event.key()
            + " in the dead-letter store failed", e);
        Step interrupted = waitToRetry(backoff);
        if (interrupted != null) {
          return interrupted;
        }
        backoff = PartitionWorker.min(backoff.multipliedBy(2), Tenure.MAX_FEED_BACKOFF);
      }
    }
    worker.observer.parked(event, reason);
    if (event.raw() instanceof UndecodableChange) {
      // The feed could not hand the change on whole (undecodable, an image missing): the status
      // says so, as for any error the partition went on after.
      worker.recordError("parked change " + event.id() + " of key " + event.key() + ": " + reason);
    }
    log.warn("Parked {}: {}", event, reason);
    return Step.CONTINUE;
  }

  /**
   * Waits {@code delay} before trying again; STOPPING if the listener closes or the lease was
   * handed over meanwhile, LOST if the lease was lost, else null.
   */
  private Step waitToRetry(Duration delay) {
    worker.pause(delay, tenure);
    if (!worker.running() || tenure.ended()) {
      return Step.STOPPING;
    }
    if (!tenure.keeper().isValid()) {
      return Step.LOST;
    }
    return null;
  }

  /** How many deliveries of this tenure are blocked on a change now; guarded by {@code this}. */
  private int blockedNow;

  /** A delivery blocks: the partition is BLOCKED while any does. */
  private synchronized void blocked() {
    blockedNow++;
    worker.setState(PartitionState.BLOCKED);
  }

  /** A blocked delivery got through: ACTIVE again once none is blocked (one ending the tenure leaves it). */
  private synchronized void unblocked() {
    blockedNow--;
    if (blockedNow == 0 && worker.state() == PartitionState.BLOCKED) {
      worker.setState(PartitionState.ACTIVE);
    }
  }

  /**
   * Whether this listener still holds the lease, asked of the store (a renewal): a rejected
   * fenced write alone does not prove a takeover. An unreachable store counts as held; the
   * keeper's deadline decides then.
   */
  private boolean stillHeld() {
    long start = System.nanoTime();
    try {
      Lease renewed = tenure.config.leaseStore().renew(tenure.keeper().lease(),
          tenure.config.leaseDuration());
      tenure.keeper().extended(renewed, start);
      return true;
    } catch (LeaseLostException e) {
      return false;
    } catch (RuntimeException e) {
      log.warn("Cannot check lease {} after a rejected fenced write: {}", tenure.fence.lease(),
          e.toString());
      return tenure.keeper().isValid();
    }
  }

  /** Handler code may leave the interrupt flag set; it must not leak into the engine. */
  private void clearInterrupt(ChangeEvent<D> event) {
    if (Thread.interrupted()) {
      log.warn("The handler left the thread's interrupt flag set (change {}); cleared", event.id());
    }
  }

  static String describe(Throwable e) {
    return e.getClass().getName() + ": " + e.getMessage();
  }
}
