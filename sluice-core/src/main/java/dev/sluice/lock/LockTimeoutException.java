package dev.sluice.lock;

import dev.sluice.SluiceException;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/** {@link LockProvider#acquire} waited as long as allowed and the lock was still held by another. */
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
