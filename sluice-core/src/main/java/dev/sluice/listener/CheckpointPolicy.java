package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import java.time.Duration;

/**
 * When the engine commits the processed position: after every change, or after {@code
 * maxChanges} changes or {@code maxDelay}, whichever comes first. After a crash, redelivery is
 * bounded by what was processed since the last commit: at most {@code maxChanges} changes.
 *
 * <p>A partition whose position moves without changes for it (an idle collection whose change
 * stream reports progress with post-batch resume tokens, a collection whose changes are all
 * filtered out, the changes of other partitions) commits that progress every {@code heartbeat}:
 * its checkpoint stays near the source's present, so a quiet partition on a busy cluster never
 * falls out of the retained history (the MongoDB oplog window), and a restart does not re-scan
 * what was already passed over.
 */
public record CheckpointPolicy(int maxChanges, Duration maxDelay, Duration heartbeat) {
  /** The default {@link #heartbeat()}. */
  public static final Duration DEFAULT_HEARTBEAT = Duration.ofSeconds(10);

  public CheckpointPolicy {
    ConfigurationException.requireNonNull(maxDelay, "checkpoint maxDelay");
    ConfigurationException.requireNonNull(heartbeat, "checkpoint heartbeat");
    ConfigurationException.require(maxChanges >= 1, "checkpoint maxChanges", maxChanges, "must be >= 1");
    ConfigurationException.require(
        !maxDelay.isNegative(), "checkpoint maxDelay", maxDelay, "must not be negative");
    ConfigurationException.require(
        !heartbeat.isNegative() && !heartbeat.isZero(), "checkpoint heartbeat", heartbeat,
        "must be positive (progress without changes is always committed, at most this often)");
  }

  /** With the default heartbeat. */
  public CheckpointPolicy(int maxChanges, Duration maxDelay) {
    this(maxChanges, maxDelay, DEFAULT_HEARTBEAT);
  }

  /** Commit after every change: at most one change is redelivered after a crash. */
  public static CheckpointPolicy everyChange() {
    return new CheckpointPolicy(1, Duration.ZERO);
  }

  /** Commit after {@code maxChanges} changes or {@code maxDelay}, whichever first. */
  public static CheckpointPolicy every(int maxChanges, Duration maxDelay) {
    return new CheckpointPolicy(maxChanges, maxDelay);
  }

  /** The default: every 100 changes or 1 second; progress without changes every 10 seconds. */
  public static CheckpointPolicy defaults() {
    return new CheckpointPolicy(100, Duration.ofSeconds(1));
  }

  /** This policy, committing progress without changes every {@code interval}. */
  public CheckpointPolicy withHeartbeat(Duration interval) {
    return new CheckpointPolicy(maxChanges, maxDelay, interval);
  }
}
