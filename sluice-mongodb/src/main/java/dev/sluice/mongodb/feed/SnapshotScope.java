package dev.sluice.mongodb.feed;

import org.bson.BsonValue;

/**
 * Which documents a snapshot reads and why: {@code _id}s from {@code from} through {@code to}
 * (both inclusive, in MongoDB's sort order; null: unbounded), for the re-snapshot request {@code
 * request} (its {@code _id}; null: the bootstrap or a repair after lost history, which read every document).
 */
record SnapshotScope(BsonValue from, BsonValue to, BsonValue request) {

  /** Every document, not on request: the bootstrap and the repair after lost history. */
  static final SnapshotScope ALL = new SnapshotScope(null, null, null);

  /** The fields this scope adds to a snapshot position, each starting with {@code ", "}. */
  String positionFields() {
    StringBuilder out = new StringBuilder();
    if (from != null) {
      out.append(", \"from\": ").append(SnapshotProgress.valueJson(from));
    }
    if (to != null) {
      out.append(", \"to\": ").append(SnapshotProgress.valueJson(to));
    }
    if (request != null) {
      out.append(", \"request\": ").append(SnapshotProgress.valueJson(request));
    }
    return out.toString();
  }

  @Override
  public String toString() {
    String range = from == null && to == null ? "every document"
        : "_id " + (from == null ? "(first)" : SnapshotProgress.shown(from)) + " through "
            + (to == null ? "(last)" : SnapshotProgress.shown(to));
    return request == null ? range : range + " (request " + SnapshotProgress.shown(request) + ")";
  }
}
