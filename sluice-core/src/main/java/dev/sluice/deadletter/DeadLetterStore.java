package dev.sluice.deadletter;

import java.util.List;
import java.util.Set;

/**
 * SPI: durable store for changes that could not be processed. Entries of one (stream, key) are
 * kept in the order they were parked; replay must follow that order.
 *
 * @param <D> the backend's document type
 */
public interface DeadLetterStore<D> {

  /** Stores a change. Idempotent on (stream, event id): parking it twice keeps one entry. */
  void park(ParkedChange<D> change);

  /** Keys of {@code stream} with at least one parked change in {@code partition}. */
  Set<String> parkedKeys(String stream, int partition);

  /** Parked changes of {@code stream}, oldest first, at most {@code limit}. */
  List<ParkedChange<D>> list(String stream, int limit);

  /** Parked changes of one key, in the order they were parked. */
  List<ParkedChange<D>> listKey(String stream, String key);

  /** Removes one entry (after a successful replay, or on an operator's discard). */
  boolean remove(String stream, String eventId);
}
