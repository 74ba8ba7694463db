package dev.sluice.lock;

import java.time.Duration;

/**
 * A lock that is <em>not</em> kept alive: it expires {@code atMostFor} after the store granted it
 * (or after the last {@link #extend}), whether or not its holder still runs, and a release keeps
 * it taken until {@code atLeastFor} has passed. This is the model of scheduled jobs (ShedLock's
 * {@code lockAtMostFor} and {@code lockAtLeastFor}): a job that hangs cannot hold its lock past
 * {@code atMostFor}, and a job that finishes quickly on one node does not run again on another
 * node whose clock is a little behind. Obtained from {@link LockProvider#tryAcquireFor}.
 *
 * <p>As with every {@link Lock}, expiry is judged on the store's clock and the {@link #token()}
 * fences writes: a holder that overran {@code atMostFor} without noticing is stopped by the
 * token, not by the lock. See {@code docs/adr/0076-timed-locks.md}.
 */
public interface TimedLock extends Lock {

  /**
   * Moves the expiry to {@code atMostFor} from now on the store's clock and the earliest release
   * to {@code atLeastFor} from now. Keeps the token.
   *
   * @return {@code false} if the lock is no longer held: it expired (on this process's cautious
   *     reckoning, which runs out a little before the store's), or the store shows it lost; the
   *     lock then stays unheld
   * @throws IllegalStateException if the lock was closed
   * @throws dev.sluice.ConfigurationException if {@code atMostFor} is under 1 ms or {@code
   *     atLeastFor} negative or above {@code atMostFor}
   * @throws dev.sluice.lease.LeaseStoreException if the store failed; the lock is as before
   */
  boolean extend(Duration atMostFor, Duration atLeastFor);

  /**
   * Releases the lock: at once if {@code atLeastFor} has passed since it was granted (or last
   * extended), otherwise it stays taken until then and expires. Idempotent; never throws.
   */
  @Override
  void close();
}
