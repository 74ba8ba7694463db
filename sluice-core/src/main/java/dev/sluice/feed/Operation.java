package dev.sluice.feed;

/** What a change did to its document or row. */
public enum Operation {
  INSERT,
  UPDATE,
  REPLACE,
  DELETE,
  /** A synthetic event produced while snapshotting existing documents or rows. */
  SNAPSHOT,
  /** Anything else the source reports (drop, rename, DDL); {@link ChangeEvent#raw()} has it. */
  OTHER
}
