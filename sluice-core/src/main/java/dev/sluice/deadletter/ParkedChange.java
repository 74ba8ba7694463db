package dev.sluice.deadletter;

import dev.sluice.feed.ChangeEvent;
import java.time.Instant;
import java.util.Objects;

/**
 * A change held in the dead-letter store.
 *
 * @param event the change, complete, so it can be replayed
 * @param partition the partition index the change belongs to
 * @param error the last error (class and message), or a note that it was parked behind an
 *     earlier change of the same key
 * @param attempts how many times the handler was tried (0 when parked behind another change)
 * @param parkedAt when it was parked
 * @param epoch the lease epoch of the owner that parked it (0: not fenced, e.g. entries written
 *     before epochs were recorded)
 * @param scope what the entry belongs to, the {@code stream} argument of {@link DeadLetterStore}'s
 *     queries: {@code <group>/<stream>} for a listener's parks ({@link
 *     dev.sluice.listener.ListenerConfig#deadLetterScope()}), so that consumer groups of one stream
 *     never see each other's parked keys; the event's stream when not given
 */
public record ParkedChange<D>(
    ChangeEvent<D> event, int partition, String error, int attempts, Instant parkedAt,
    long epoch, String scope) {

  /** An entry scoped by the event's own stream. */
  public ParkedChange(ChangeEvent<D> event, int partition, String error, int attempts,
      Instant parkedAt, long epoch) {
    this(event, partition, error, attempts, parkedAt, epoch, null);
  }

  public ParkedChange {
    if (scope == null && event != null) {
      scope = event.stream();
    }
    Objects.requireNonNull(event, "event");
    Objects.requireNonNull(error, "error");
    Objects.requireNonNull(parkedAt, "parkedAt");
    if (epoch < 0) {
      throw new IllegalArgumentException("epoch must be >= 0, but was " + epoch);
    }
  }
}
