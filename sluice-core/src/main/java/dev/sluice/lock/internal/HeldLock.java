package dev.sluice.lock.internal;

import dev.sluice.SluiceException;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lock.Lock;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** A lock backed by one lease; extended on the provider's extender thread. */
final class HeldLock implements Lock {
  private static final Logger LOG = LoggerFactory.getLogger(HeldLock.class);

  private enum State { HELD, LOST, RELEASED }

  private final LeaseLockProvider provider;
  private final String name;
  private final long token;
  /** Serializes extension, loss and release: never release while a renewal is in flight. */
  private final ReentrantLock mutex = new ReentrantLock();
  private volatile Lease lease;
  /**
   * Ticker nanos until which the last grant is certainly valid: measured on the monotonic ticker
   * from before the request was sent, so it errs on the early side whatever the store's clock says.
   */
  private volatile long validUntil;
  private volatile State state = State.HELD;
  private ScheduledFuture<?> extension;

  HeldLock(LeaseLockProvider provider, String name, Lease lease, long validUntil) {
    this.provider = provider;
    this.name = name;
    this.lease = lease;
    this.token = lease.epoch();
    this.validUntil = validUntil;
  }

  void startExtending() {
    mutex.lock();
    try {
      if (state == State.HELD) {
        long every = provider.extendEvery.toMillis();
        extension = provider.extender.scheduleWithFixedDelay(
            this::extend, every, every, TimeUnit.MILLISECONDS);
      }
    } finally {
      mutex.unlock();
    }
  }

  private void extend() {
    SluiceException lostBecause = null;
    mutex.lock();
    try {
      if (state != State.HELD) {
        return;
      }
      long sentAt = provider.ticker.nanos();
      if (sentAt - validUntil >= 0) {
        // This process was paused or the store unreachable past the lease: someone else may
        // have held the lock meanwhile, so even a renewal that succeeds now would hide a gap.
        lostBecause = new LeaseLostException(lease.name(), token,
            "not extended before it ran out (process paused or store unreachable for longer than "
                + provider.leaseDuration + ")");
        tryRelease();
      } else {
        try {
          lease = provider.store.renew(lease, provider.leaseDuration);
          validUntil = sentAt + provider.leaseDuration.toNanos();
        } catch (LeaseLostException e) {
          lostBecause = e;
        } catch (RuntimeException e) {
          // Transient (store unreachable): extendEvery < lease/2 leaves time for another try;
          // the check above turns this into a loss once the lease has run out.
          LOG.warn("Could not extend lock '{}' (token {}); will retry until it runs out", name,
              token, e);
        }
      }
      if (lostBecause != null) {
        state = State.LOST;
        cancelExtension();
        provider.forget(this);
      }
    } finally {
      mutex.unlock();
    }
    if (lostBecause != null) {
      provider.notifyLost(this, lostBecause);
    }
  }

  private void tryRelease() {
    try {
      provider.store.release(lease);
    } catch (RuntimeException e) {
      LOG.warn("Could not release lock '{}' (token {}); it will expire", name, token, e);
    }
  }

  private void cancelExtension() {
    if (extension != null) {
      extension.cancel(false);
    }
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public long token() {
    return token;
  }

  @Override
  public boolean isHeld() {
    return state == State.HELD && provider.ticker.nanos() - validUntil < 0;
  }

  @Override
  public void close() {
    mutex.lock();
    try {
      if (state != State.HELD) {
        return;
      }
      state = State.RELEASED;
      cancelExtension();
      provider.forget(this);
      // Releases only this owner's own epoch: after a takeover the store ignores it.
      tryRelease();
    } finally {
      mutex.unlock();
    }
  }

  @Override
  public String toString() {
    return "Lock[" + name + ", token " + token + ", " + state + "]";
  }
}
