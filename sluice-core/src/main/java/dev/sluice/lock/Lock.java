package dev.sluice.lock;

/**
 * A held distributed lock. Close it (try-with-resources) to release it; closing twice, or closing
 * a lock that was already lost, is harmless and never releases someone else's lock.
 *
 * <p>While held, the lock is extended in the background. If an extension shows that the lock was
 * lost (its lease expired and may have been taken over, for example after a long pause of this
 * process), {@link #isHeld()} turns false and the provider's {@link LockLostListener} is called.
 * Work done under the lock should therefore pass {@link #token()} to every system it writes to:
 * that is what keeps a holder that lost the lock without noticing from doing damage.
 */
public interface Lock extends AutoCloseable {

  /** The name the lock was acquired for (as given to {@link LockProvider#acquire}). */
  String name();

  /**
   * The fencing token: strictly greater than the token of every earlier acquisition of this name,
   * by any process, and never reused. Downstream systems reject writes whose token is lower than
   * the highest they have seen (see {@code docs/locks.md}).
   */
  long token();

  /**
   * Whether this process still holds the lock: not closed, no extension reported it lost, and the
   * last successful extension has not run out on this process's own (monotonic) reckoning.
   * A {@code true} is a hint, not a guarantee: only the fencing token makes writes safe.
   */
  boolean isHeld();

  /** Releases the lock if still held and stops extending it. Idempotent; never throws. */
  @Override
  void close();
}
