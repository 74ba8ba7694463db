package dev.sluice.listener.internal;

/**
 * What a step of a tenure (delivering a change, committing a checkpoint, opening the feed) ended
 * with, so the feed loop decides by value instead of unwinding by exception.
 */
enum Step {
  /** Done; go on. */
  CONTINUE,
  /** A flush failed and the cursor was re-opened at the checkpoint: the rest of the batch is stale. */
  REWOUND,
  /** The listener is closing: the step was not completed and stays after the checkpoint. */
  STOPPING,
  /** The lease was lost: stop delivering at once. */
  LOST,
  /** The partition cannot go on (the error is recorded): stop for good and release the lease. */
  FAILED,
  /**
   * The handler failed and the change is tried again after a back-off ({@link Delivery#retryIn}),
   * without holding the thread meanwhile: the feed loop keeps it and the rest of its batch.
   */
  RETRY_LATER
}
