package dev.sluice.deadletter;

import java.util.List;
import java.util.Set;

/**
 * SPI: durable store for changes that could not be processed. Entries of one (stream, key) are
 * kept in the order they were parked; replay must follow that order.
 *
 * <p>The {@code stream} argument of every method is the entry's {@link ParkedChange#scope()}: a
 * listener parks under {@code <group>/<stream>}, so each consumer group of a stream has its own
 * parked keys in a shared store.
 *
 * <p>Parks are fenced per partition (docs/adr/0045-parked-keys-follow-the-dead-letter-store.md):
 * the store remembers the highest lease epoch that parked in each (stream, partition) and refuses
 * a park from a lower epoch with {@link StaleParkException}, so an owner that lost its lease can
 * never add an entry after the new owner's.
 *
 * @param <D> the backend's document type
 */
public interface DeadLetterStore<D> {

  /**
   * Stores a change. Idempotent on (stream, event id): parking it twice keeps one entry.
   *
   * @throws StaleParkException if a later lease epoch already parked in this stream and partition
   *     ({@link ParkedChange#epoch()} 0 is not fenced)
   */
  void park(ParkedChange<D> change);

  /** Whether {@code key} of {@code stream} has at least one parked change in {@code partition}. */
  boolean hasParked(String stream, int partition, String key);

  /**
   * Keys of {@code stream} with at least one parked change in {@code partition}, at most {@code
   * limit} of them (oldest parked first), so that a partition with very many parked keys never
   * has to be held in memory at once.
   */
  Set<String> parkedKeys(String stream, int partition, int limit);

  /** Parked changes of {@code stream}, oldest first, at most {@code limit}. */
  List<ParkedChange<D>> list(String stream, int limit);

  /** Parked changes of one key, in the order they were parked. */
  List<ParkedChange<D>> listKey(String stream, String key);

  /** Removes one entry (after a successful replay, or on an operator's discard). */
  boolean remove(String stream, String eventId);
}
