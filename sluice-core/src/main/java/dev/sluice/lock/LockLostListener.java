package dev.sluice.lock;

import dev.sluice.SluiceException;

/** Told when a held lock is lost before it was closed. */
@FunctionalInterface
public interface LockLostListener {

  /**
   * Called once, on the provider's extension thread, when {@code lock} is lost. Must not block
   * for long: it delays the extension of the provider's other locks.
   *
   * @param lock the lost lock; {@link Lock#isHeld()} is already false
   * @param cause why: a {@link dev.sluice.lease.LeaseLostException} (someone else took it over or
   *     it expired) or the last error of an extension that could not reach the store in time
   */
  void lockLost(Lock lock, SluiceException cause);
}
