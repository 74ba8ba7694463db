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
  OTHER,
  /**
   * A message the application wrote into the source's log without a row (PostgreSQL {@code
   * pg_logical_emit_message}): an outbox entry with no outbox table. Its key is the message's
   * prefix; its document holds the prefix and the content (ADR 0096).
   */
  MESSAGE
}
