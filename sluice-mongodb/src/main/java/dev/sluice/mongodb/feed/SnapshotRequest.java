package dev.sluice.mongodb.feed;

import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.bson.BsonValue;

/**
 * A re-snapshot asked of one consumer group's partitions of one stream ({@code docs/adr/0067}):
 * each partition re-reads the documents of its keys with {@code _id} from {@code fromId} through
 * {@code toId} while it streams on, and records when it has read the last of them.
 *
 * @param id the request's {@code _id} as a string ({@link MongoChangeFeed#keyOf})
 * @param group the consumer group that re-reads
 * @param stream the stream it re-reads
 * @param fromId the first {@code _id} read (inclusive), or null for the first of the collection
 * @param toId the last {@code _id} read (inclusive), or null for the last of the collection
 * @param requestedAt when it was asked for (null in a request document written without one)
 * @param done when each partition ({@link #partitionKey}) read its last chunk
 */
public record SnapshotRequest(String id, String group, String stream, BsonValue fromId, BsonValue toId,
    Instant requestedAt, Map<String, Instant> done) {

  public SnapshotRequest {
    Objects.requireNonNull(id, "id");
    done = Map.copyOf(done);
  }

  /** How a partition is named in {@link #done}: {@code <index>of<count>}, as in its lease name. */
  public static String partitionKey(PartitionSpec partition) {
    return partition.index() + "of" + partition.count();
  }

  /** Whether {@code partition} has read the last of its documents. */
  public boolean doneBy(PartitionSpec partition) {
    return done.containsKey(partitionKey(partition));
  }

  /**
   * Where a partition whose checkpoint is {@code checkpoint} stands in this request, if it is
   * reading it: {@code "before its first document"} or {@code "after _id <_id>"}; empty when the
   * checkpoint is not in this request (not started, done, or another snapshot).
   */
  public Optional<String> readingAt(Position checkpoint) {
    if (checkpoint == null || !SnapshotProgress.isSnapshot(checkpoint)) {
      return Optional.empty();
    }
    SnapshotProgress progress;
    try {
      progress = SnapshotProgress.fromPosition(checkpoint);
    } catch (RuntimeException e) {
      return Optional.empty();
    }
    BsonValue request = progress.scope().request();
    if (request == null || !MongoEvents.keyOf(request).equals(id)) {
      return Optional.empty();
    }
    return Optional.of(progress.after() == null ? "before its first document"
        : "after _id " + SnapshotProgress.shown(progress.after()));
  }

  /** The range in words: {@code every document}, or {@code _id <from> through <to>}. */
  public String range() {
    return new SnapshotScope(fromId, toId, null).toString();
  }

  /** Whether every partition of a group of {@code partitions} has. */
  public boolean complete(int partitions) {
    for (int i = 0; i < partitions; i++) {
      if (!doneBy(new PartitionSpec(i, partitions))) {
        return false;
      }
    }
    return true;
  }
}
