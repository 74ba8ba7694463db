package dev.sluice.listener;

import dev.sluice.feed.ChangeEvent;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The user's processing of changes. Called for each partition with one change at a time, in feed
 * order, from one of the listener's {@linkplain Listener.Builder#threads threads} (not always the
 * same one; with {@link Listener.Builder#concurrency} above 1: several changes of different keys at
 * once, each key's in feed order).
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

  /**
   * Starts making durable every change handed to {@link #handle} so far and returns at once; the
   * stage completes when they are, or fails as {@link #flush} would throw. With a pipelined
   * {@link CheckpointPolicy} the engine goes on handling later changes while it is pending and
   * commits a checkpoint covering these changes only after it completed; stages complete or fail
   * in the order they were asked for, or the engine treats a later one as pending until the earlier
   * did. Default: {@link #flush} on the calling thread.
   */
  default CompletionStage<Void> flushAsync(Fence fence) {
    try {
      flush(fence);
      return CompletableFuture.completedFuture(null);
    } catch (Throwable e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  /**
   * Whether {@link #handle} may be called for changes of different keys at once, from several
   * threads ({@link Listener.Builder#concurrency} above 1); then {@link #flush} may also run while
   * later changes are being handled, and must make durable at least every change whose {@code
   * handle} has returned. Default true: a handler given to such a listener is thread-safe by the
   * user's choice. Handlers that handle one change at a time per partition say false, and the
   * listener refuses a concurrency above 1 for them.
   */
  default boolean concurrentCalls() {
    return true;
  }
}
