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
 */
public record ParkedChange<D>(
    ChangeEvent<D> event, int partition, String error, int attempts, Instant parkedAt) {
  public ParkedChange {
    Objects.requireNonNull(event, "event");
    Objects.requireNonNull(error, "error");
    Objects.requireNonNull(parkedAt, "parkedAt");
  }
}
