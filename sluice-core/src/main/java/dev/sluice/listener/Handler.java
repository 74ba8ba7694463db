package dev.sluice.listener;

import dev.sluice.feed.ChangeEvent;

/**
 * The user's processing of changes. Called by one thread per partition, in feed order.
 *
 * <p>Throwing from {@link #handle} triggers the listener's {@link FailurePolicy}; throwing
 * {@link StaleFenceException} stops the partition at once (another owner took over).
 *
 * @param <D> the backend's document type
 */
@FunctionalInterface
public interface Handler<D> {

  /** Processes one change. Side effects should carry {@code fence}. */
  void handle(ChangeEvent<D> event, Fence fence) throws Exception;

  /**
   * Called before the engine commits a checkpoint that covers every change handed to {@link
   * #handle} so far. A handler that works asynchronously (a broker sink) waits here until all of
   * them are acknowledged. If this throws, nothing is committed and the engine delivers again
   * from the last checkpoint, so nothing is lost and order is kept (at the price of duplicates).
   */
  default void flush(Fence fence) throws Exception {}
}
