package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import java.time.Duration;

/**
 * When the engine commits the processed position: after every change, or after {@code
 * maxChanges} changes or {@code maxDelay}, whichever comes first. After a crash, redelivery is
 * bounded by what was processed since the last commit: at most {@code maxChanges} changes.
 */
public record CheckpointPolicy(int maxChanges, Duration maxDelay) {
  public CheckpointPolicy {
    ConfigurationException.requireNonNull(maxDelay, "checkpoint maxDelay");
    ConfigurationException.require(maxChanges >= 1, "checkpoint maxChanges", maxChanges, "must be >= 1");
    ConfigurationException.require(
        !maxDelay.isNegative(), "checkpoint maxDelay", maxDelay, "must not be negative");
  }

  /** Commit after every change: at most one change is redelivered after a crash. */
  public static CheckpointPolicy everyChange() {
    return new CheckpointPolicy(1, Duration.ZERO);
  }

  /** Commit after {@code maxChanges} changes or {@code maxDelay}, whichever first. */
  public static CheckpointPolicy every(int maxChanges, Duration maxDelay) {
    return new CheckpointPolicy(maxChanges, maxDelay);
  }

  /** The default: every 100 changes or 1 second. */
  public static CheckpointPolicy defaults() {
    return new CheckpointPolicy(100, Duration.ofSeconds(1));
  }
}
