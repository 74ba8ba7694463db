package dev.sluice.lock;

import dev.sluice.lease.Lease;
import dev.sluice.lease.internal.LeaseKeeper;

/** A lock backed by one lease, kept by a {@link LeaseKeeper} on the provider's extender thread. */
final class LeaseLock extends LeaseBackedLock {
  private final LeaseKeeper keeper;
  private volatile boolean closed;

  LeaseLock(LeaseLockProvider provider, String name, Lease lease, long requestStartNanos) {
    super(provider, name, lease.epoch());
    this.keeper = new LeaseKeeper(provider.store, lease, requestStartNanos,
        provider.leaseDuration, provider.extendEvery, provider.extender, provider.ticker,
        (lost, cause) -> {
          provider.forget(this);
          provider.notifyLost(this, cause);
        });
  }

  void startExtending() {
    keeper.start();
  }

  @Override
  public boolean isHeld() {
    return !closed && keeper.isValid();
  }

  @Override
  public void close() {
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
    }
    provider.forget(this);
    // Releases only this owner's own epoch: after a takeover the store ignores it.
    keeper.release();
  }

  @Override
  public String toString() {
    String state = closed ? "RELEASED" : keeper.lostReason() != null ? "LOST" : "HELD";
    return "Lock[" + name + ", token " + token + ", " + state + "]";
  }
}
