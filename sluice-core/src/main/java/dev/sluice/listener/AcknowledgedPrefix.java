package dev.sluice.listener;

import dev.sluice.feed.Position;

/**
 * Implemented by the exception a {@link Handler}'s flush fails with when the handler knows how far,
 * in the order the changes were handed to it, every change was made durable: a broker sink whose
 * broker acknowledged the first records of the batch and not a later one. Before delivering again
 * from the checkpoint, the listener commits that position (with a concurrency of 1, where the
 * changes are handed over in feed order), so the changes before it are not sent again, now or
 * after a restart (ADR 0120).
 */
public interface AcknowledgedPrefix {

  /**
   * The position of the last change of the longest prefix of the failed flush's changes, in the
   * order they were handed to the handler, whose every message was acknowledged; null when not
   * even the first change was.
   */
  Position acknowledgedThrough();
}
