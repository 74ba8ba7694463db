package dev.sluice.lock;

import dev.sluice.SluiceException;

/** Told when a held lock is lost before it was closed. */
@FunctionalInterface
public interface LockLostListener {

  /**
   * Called once when {@code lock} is lost: on the provider's extension thread when an extension
   * was rejected, on a {@code sluice-lease-lost} thread at the local deadline when no extension
   * got through in time (the store unreachable or silent; docs/adr/0100), or on the caller's
   * thread when {@link Lock#isHeld()} finds the deadline passed first. Must not block for long:
   * on the extension thread it delays the extension of the provider's other locks, on the
   * {@code sluice-lease-lost} thread the loss notices of the process's other leases.
   *
   * @param lock the lost lock; {@link Lock#isHeld()} is already false
   * @param cause why: a {@link dev.sluice.lease.LeaseLostException} (someone else took it over or
   *     it expired) or the last error of an extension that could not reach the store in time
   */
  void lockLost(Lock lock, SluiceException cause);
}
