package dev.sluice.listener;

/** The state of one partition inside one listener instance. */
public enum PartitionState {
  /**
   * Not held by this instance; trying to acquire it (also after a restart of the partition that
   * followed an unexpected error: see {@link PartitionStatus#restarts()}).
   */
  ACQUIRING,
  /** Held; delivering changes to the handler. */
  ACTIVE,
  /**
   * Held, but a change keeps failing after the retry attempts were used up and the failure
   * policy is {@link FailurePolicy.Block}: the partition does not advance until it succeeds.
   * {@link PartitionStatus#error()} names the change and the failure, {@link
   * PartitionStatus#attempts()} counts its failures and {@link PartitionStatus#nextAttemptAt()}
   * says when it is tried next.
   */
  BLOCKED,
  /**
   * Held, but reading the feed (or a store the partition needs to go on: the group's records, the
   * dead-letter store to read or park in), or committing the checkpoint, failed with an error that
   * can pass (a failover, a network error, a timeout): it is tried again with back-off (a read from
   * the last checkpoint). Also while the handler fails on a change that its retry policy tries again
   * in place (a view's or a fenced write's server error), before the attempts are used up. {@link
   * PartitionStatus#error()} names the error, {@link PartitionStatus#attempts()} counts the
   * failures in a row and {@link PartitionStatus#nextAttemptAt()} says when the next try is. Back
   * to {@link #ACTIVE} once what failed succeeds.
   */
  RETRYING,
  /** The lease was lost; delivery stopped; will compete again. */
  LOST,
  /**
   * Stopped for good because of an error that retrying cannot fix (history lost under STOP, a
   * feed or lease-store request the server rejects as invalid or unauthorized, partition counts
   * that disagree within the group). The lease is released so that a peer may try; {@link
   * PartitionStatus#error()} names the cause.
   */
  FAILED,
  /** The source ended the stream (MongoDB invalidate). */
  ENDED,
  /** The listener was closed. */
  STOPPED
}
