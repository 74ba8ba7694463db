package dev.sluice.lock;

import dev.sluice.SluiceException;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * {@link LockProvider#acquire} waited as long as allowed and the lock was still held by another,
 * or the lock store did not answer within that time.
 */
public class LockTimeoutException extends SluiceException {
  private static final long serialVersionUID = 1L;

  private final String lockName;
  private final Duration waited;
  private final String holder;

  public LockTimeoutException(
      String lockName, Duration waited, String holder, Long holderToken, Instant holderExpiresAt) {
    super("Could not acquire lock '" + lockName + "' within " + waited
        + (holder == null ? "; current holder unknown"
            : "; held by " + holder + " (token " + holderToken + ", expires " + holderExpiresAt
                + " on the store's clock)"));
    this.lockName = lockName;
    this.waited = waited;
    this.holder = holder;
  }

  /**
   * The wait ended because the lock store did not answer an attempt in time (unreachable, no
   * majority, paused); whether anyone holds the lock is unknown.
   */
  public LockTimeoutException(String lockName, Duration waited, String why) {
    super("Could not acquire lock '" + lockName + "' within " + waited + ": " + why
        + "; current holder unknown");
    this.lockName = lockName;
    this.waited = waited;
    this.holder = null;
  }

  public String lockName() {
    return lockName;
  }

  public Duration waited() {
    return waited;
  }

  /** The owner id of the holder when the wait ended, if the store could tell. */
  public Optional<String> holder() {
    return Optional.ofNullable(holder);
  }
}
