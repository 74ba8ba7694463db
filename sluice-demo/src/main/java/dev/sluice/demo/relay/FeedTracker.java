package dev.sluice.demo.relay;

import com.mongodb.client.MongoClient;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.bson.json.JsonParseException;

/**
 * The verifier's own reading of the source collection's change stream, from the oldest change,
 * on a separate cursor that no relay touches: the ground truth of which changes exist and in
 * which order they happened per key. A relay's checkpoint and a consumer's message are placed in
 * this order by their change id (the resume token's data, stable across re-reads).
 */
final class FeedTracker implements AutoCloseable {
  private final FeedCursor<BsonDocument> cursor;
  private final Thread reader;
  private final List<String> ids = new ArrayList<>();
  private final List<String> keys = new ArrayList<>();
  private final Map<String, Integer> indexById = new HashMap<>();
  private volatile boolean running = true;
  private volatile RuntimeException failure;

  FeedTracker(MongoClient client) {
    this.cursor = MongoChangeFeed.builder(client, RelayDemo.DATABASE, RelayDemo.COLLECTION)
        .batchSize(500)
        .build()
        .open(PartitionSpec.single(), StartPoint.oldest());
    this.reader = new Thread(this::read, "relay-demo-feed-tracker");
    this.reader.setDaemon(true);
    this.reader.start();
  }

  private void read() {
    try {
      while (running) {
        List<ChangeEvent<BsonDocument>> batch = cursor.poll(Duration.ofMillis(100));
        synchronized (this) {
          for (ChangeEvent<BsonDocument> e : batch) {
            if (indexById.putIfAbsent(e.id(), ids.size()) == null) {
              ids.add(e.id());
              keys.add(e.key());
            }
          }
        }
      }
    } catch (RuntimeException e) {
      if (running) {
        failure = e;
      }
    }
  }

  /** Changes read so far. */
  synchronized int size() {
    checkHealthy();
    return ids.size();
  }

  /** The 0-based feed index of a change, if the tracker has read it. */
  synchronized Optional<Integer> indexOf(String changeId) {
    checkHealthy();
    return Optional.ofNullable(indexById.get(changeId));
  }

  /**
   * The number of changes a committed checkpoint covers: the index of the change it points
   * after, plus one. Empty when the tracker has not read that change yet or the position is not
   * an event's resume token (a bootstrap operation time, a post-batch token).
   */
  Optional<Integer> changesCoveredBy(Position checkpoint) {
    if (checkpoint == null) {
      return Optional.of(0);
    }
    String changeId;
    try {
      BsonValue after = BsonDocument.parse(checkpoint.token()).get("resumeAfter");
      if (after == null || !after.isDocument() || !after.asDocument().isString("_data")) {
        return Optional.empty();
      }
      changeId = after.asDocument().getString("_data").getValue();
    } catch (JsonParseException e) {
      return Optional.empty();
    }
    return indexOf(changeId).map(i -> i + 1);
  }

  /** Change ids of every key, in feed order. */
  synchronized Map<String, List<String>> idsPerKey() {
    checkHealthy();
    Map<String, List<String>> perKey = new HashMap<>();
    for (int i = 0; i < ids.size(); i++) {
      perKey.computeIfAbsent(keys.get(i), k -> new ArrayList<>()).add(ids.get(i));
    }
    return perKey;
  }

  private void checkHealthy() {
    RuntimeException f = failure;
    if (f != null) {
      throw new IllegalStateException("The verifier's change stream cursor failed: " + f, f);
    }
  }

  @Override
  public void close() {
    running = false;
    try {
      reader.join(Duration.ofSeconds(5).toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    cursor.close();
  }
}
