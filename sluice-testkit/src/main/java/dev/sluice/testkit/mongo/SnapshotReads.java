package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;

/**
 * Reads at {@code readConcern: {level: "snapshot"}} (MongoDB 5.0+, in a session with
 * {@code snapshot: true}), answered as a real server answers them where the test kit can
 * ({@code docs/adr/0057}):
 *
 * <ul>
 *   <li>without {@code atClusterTime}, the server picks the time: the read runs under the test
 *       kit's read lock (no write is half done, {@link TrimmableMemoryBackend}), copies every
 *       document it returns at once (so later batches show the same point in time, not the
 *       documents as they are when a {@code getMore} comes), and its reply's cursor carries
 *       {@code atClusterTime}, the newest oplog entry's timestamp at that moment: every write up to
 *       it is in the read, none after. The driver keeps that time for the session's later reads;
 *   <li>with {@code atClusterTime} T, a real server reads the collection as it was at T (within
 *       {@code minSnapshotHistoryWindowInSeconds}). The test kit keeps no history: it reads now
 *       only when nothing in the collection changed after T, which is the same read; otherwise it
 *       refuses with an error that says it cannot, never with a state of another time.
 *       {@code 239 SnapshotTooOld} and {@code 246 SnapshotUnavailable} are what a real server
 *       answers when its history does not reach T or the collection changed in a way a snapshot
 *       cannot see (a {@code collMod}, an index build); tests ask for them with the
 *       {@code failCommand} fail point, as on a real server.
 * </ul>
 */
final class SnapshotReads {
  private SnapshotReads() {}

  /** Whether {@code command} is a read at the snapshot read concern. */
  static boolean applies(String command, Document query) {
    return ("find".equals(command) || "aggregate".equals(command))
        && query.get("readConcern") instanceof Document rc && "snapshot".equals(rc.get("level"));
  }

  /** The time a snapshot read named, or null when the server is to pick it. */
  static BsonTimestamp atClusterTime(Document query) {
    return ((Document) query.get("readConcern")).get("atClusterTime") instanceof BsonTimestamp t ? t : null;
  }

  /**
   * The time of a snapshot read of {@code namespace} asked at {@code asked} (null: now), under the
   * read lock; refused when the test kit cannot read at the time asked.
   */
  static BsonTimestamp readAt(FaithfulOplog oplog, String namespace, BsonTimestamp asked) {
    BsonTimestamp newest = oplog.newest();
    if (asked == null) {
      return newest != null ? newest : new BsonTimestamp(0);
    }
    for (Document entry : oplog.inOrder(false)) {
      if (!(entry.get("ts") instanceof BsonTimestamp ts) || ts.compareTo(asked) <= 0) {
        break;
      }
      if (concerns(entry, namespace)) {
        throw new MongoServerError(1, "InternalError", "the test kit cannot read " + namespace + " at atClusterTime "
            + asked + ": it keeps no history, and the collection changed at " + ts + " since. A real server reads"
            + " the collection as it was then (or answers 239 SnapshotTooOld past minSnapshotHistoryWindowInSeconds;"
            + " arm the failCommand fail point to have it here)");
      }
    }
    return asked;
  }

  /** Whether an oplog entry writes to {@code namespace} or runs a command on it. */
  private static boolean concerns(Document entry, String namespace) {
    Object ns = entry.get("ns");
    if (namespace.equals(ns)) {
      return true;
    }
    int dot = namespace.indexOf('.');
    return (namespace.substring(0, dot) + ".$cmd").equals(ns) && entry.get("o") instanceof Document o
        && !o.isEmpty() && namespace.substring(dot + 1).equals(String.valueOf(o.values().iterator().next()));
  }

  /**
   * The command to run for a snapshot read: every document in the first batch, copied under the
   * read lock; the reply is then cut into the batches asked for ({@link ReplyBatches}).
   */
  static Document whole(String command, Document query) {
    Document whole = new Document(query);
    if ("find".equals(command)) {
      whole.remove("batchSize");
    } else {
      whole.put("cursor", new Document());
    }
    return whole;
  }

  /** How many documents the first batch of {@code query} holds at most: what it asked, else a real server's 101. */
  static int firstBatchSize(String command, Document query) {
    Object asked = "find".equals(command) ? query.get("batchSize")
        : query.get("cursor") instanceof Document c ? c.get("batchSize") : null;
    return asked instanceof Number n && n.intValue() > 0 ? n.intValue() : 101;
  }
}
