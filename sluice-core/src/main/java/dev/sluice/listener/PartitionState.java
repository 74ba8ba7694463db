package dev.sluice.listener;

/** The state of one partition inside one listener instance. */
public enum PartitionState {
  /** Not held by this instance; trying to acquire it. */
  ACQUIRING,
  /** Held; delivering changes to the handler. */
  ACTIVE,
  /** The lease was lost; delivery stopped; will compete again. */
  LOST,
  /** Stopped for good because of an error the policy says must not be skipped (history lost). */
  FAILED,
  /** The source ended the stream (MongoDB invalidate). */
  ENDED,
  /** The listener was closed. */
  STOPPED
}
