package dev.sluice.mongodb.listener;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;

/**
 * A sink for the snapshot tests: each key's latest {@code version} (documents carry a version that
 * every write raises), every key that went back to an older version, and how many SNAPSHOT changes
 * arrived. The same state twice is not counted: after a partition changes hands in the middle of
 * its snapshot, the new owner may read again a document whose state the stream already handed out
 * (feed-level tests check that one cursor never repeats a state).
 */
final class VersionedSink {
  final Map<String, Long> state = new ConcurrentHashMap<>();
  final List<String> wentBack = new CopyOnWriteArrayList<>();
  final AtomicInteger snapshots = new AtomicInteger();

  void apply(ChangeEvent<BsonDocument> change) {
    if (change.operation() == Operation.SNAPSHOT) {
      snapshots.incrementAndGet();
    }
    if (change.operation() == Operation.DELETE) {
      state.remove(change.key());
      return;
    }
    if (change.document() == null) {
      return; // an update looked up after its document was deleted: the delete follows
    }
    long version = change.document().getInt64("version").getValue();
    Long before = state.put(change.key(), version);
    if (before != null && before > version) {
      wentBack.add(change + ": version " + version + " after " + before);
    }
  }
}
