package dev.sluice.mongodb.sequenced;

/** What a sequenced write did. */
public enum Outcome {
  /** The operation was newer than anything stored for its member (or value) and is now stored. */
  APPLIED,
  /**
   * An operation with the same or a higher sequence number was already stored for this member (or
   * value): this one is a duplicate or arrived late, and changing nothing is the correct result.
   */
  SUPERSEDED
}
