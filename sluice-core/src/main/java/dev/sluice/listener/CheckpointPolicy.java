package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import java.time.Duration;

/**
 * When the engine commits the processed position: after every change, or after {@code
 * maxChanges} changes or {@code maxDelay}, whichever comes first.
 *
 * <p>Pipelined ({@code flushesInFlight} above 0, the default): at each {@code maxChanges} the
 * engine asks the handler to make the changes so far durable ({@link Handler#flushAsync}, a sink
 * awaiting its broker's acknowledgements) and goes on reading and handling the next changes while
 * up to {@code flushesInFlight} such flushes are pending; it commits a checkpoint only once a flush
 * completed, and only up to the changes that flush covered, in order. A failed flush rewinds to the
 * last checkpoint. After a crash, redelivery is bounded by what was handled since the last commit:
 * at most {@code (flushesInFlight + 1) * maxChanges} changes ({@code maxChanges} with 0).
 *
 * <p>A partition whose position moves without changes for it (an idle collection whose change
 * stream reports progress with post-batch resume tokens, a collection whose changes are all
 * filtered out, the changes of other partitions) commits that progress every {@code heartbeat}:
 * its checkpoint stays near the source's present, so a quiet partition on a busy cluster never
 * falls out of the retained history (the MongoDB oplog window), and a restart does not re-scan
 * what was already passed over.
 */
public record CheckpointPolicy(int maxChanges, Duration maxDelay, Duration heartbeat,
    int flushesInFlight) {
  /** The default {@link #heartbeat()}. */
  public static final Duration DEFAULT_HEARTBEAT = Duration.ofSeconds(10);
  /** The default {@link #flushesInFlight()}. */
  public static final int DEFAULT_FLUSHES_IN_FLIGHT = 4;
  /** The largest {@link #flushesInFlight()}. */
  public static final int MAX_FLUSHES_IN_FLIGHT = 1_000;

  public CheckpointPolicy {
    ConfigurationException.requireNonNull(maxDelay, "checkpoint maxDelay");
    ConfigurationException.requireNonNull(heartbeat, "checkpoint heartbeat");
    ConfigurationException.require(maxChanges >= 1, "checkpoint maxChanges", maxChanges, "must be >= 1");
    ConfigurationException.require(
        !maxDelay.isNegative(), "checkpoint maxDelay", maxDelay, "must not be negative");
    ConfigurationException.require(
        !heartbeat.isNegative() && !heartbeat.isZero(), "checkpoint heartbeat", heartbeat,
        "must be positive (progress without changes is always committed, at most this often)");
    ConfigurationException.require(flushesInFlight >= 0 && flushesInFlight <= MAX_FLUSHES_IN_FLIGHT,
        "checkpoint flushesInFlight", flushesInFlight, "must be 0 (each checkpoint waits for its"
        + " flush) to " + MAX_FLUSHES_IN_FLIGHT);
  }

  /** With the default number of flushes in flight. */
  public CheckpointPolicy(int maxChanges, Duration maxDelay, Duration heartbeat) {
    this(maxChanges, maxDelay, heartbeat, DEFAULT_FLUSHES_IN_FLIGHT);
  }

  /** With the default heartbeat and flushes in flight. */
  public CheckpointPolicy(int maxChanges, Duration maxDelay) {
    this(maxChanges, maxDelay, DEFAULT_HEARTBEAT);
  }

  /**
   * Commit after every change, each waiting for its flush: at most one change is redelivered
   * after a crash.
   */
  public static CheckpointPolicy everyChange() {
    return new CheckpointPolicy(1, Duration.ZERO, DEFAULT_HEARTBEAT, 0);
  }

  /** Commit after {@code maxChanges} changes or {@code maxDelay}, whichever first. */
  public static CheckpointPolicy every(int maxChanges, Duration maxDelay) {
    return new CheckpointPolicy(maxChanges, maxDelay);
  }

  /** The default {@link #maxChanges()} (100 before issue 36; ADR 0126). */
  public static final int DEFAULT_MAX_CHANGES = 1_000;

  /**
   * The default: every 1,000 changes or 1 second, up to 4 flushes in flight; progress without
   * changes every 10 seconds. A checkpoint is a write to the lease store on the partition's
   * thread; at 1,000 changes a backlog pays one per 1,000 changes instead of one per 100 (ADR
   * 0126), and a crash delivers again at most 5,000 changes or what was handled in the last
   * second or so.
   */
  public static CheckpointPolicy defaults() {
    return new CheckpointPolicy(DEFAULT_MAX_CHANGES, Duration.ofSeconds(1));
  }

  /** This policy, committing progress without changes every {@code interval}. */
  public CheckpointPolicy withHeartbeat(Duration interval) {
    return new CheckpointPolicy(maxChanges, maxDelay, interval, flushesInFlight);
  }

  /**
   * This policy with up to {@code flushes} flushes pending while the next changes are read and
   * handled; 0: every checkpoint waits for its flush before the partition reads on.
   */
  public CheckpointPolicy withFlushesInFlight(int flushes) {
    return new CheckpointPolicy(maxChanges, maxDelay, heartbeat, flushes);
  }
}
