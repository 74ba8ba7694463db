package dev.sluice.mongodb.feed;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import java.util.concurrent.TimeUnit;
import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.BulkWriteOptions;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.UpdateOneModel;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.WriteModel;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A snapshot whose stream lags far behind (issue 32, section 3 item 5; {@code docs/adr/0086}):
 * 100,000 changes written after the snapshot started and before its next chunk is read. The
 * snapshot goes on handing out the stream's changes while it catches up, holds no more than a chunk
 * and a batch ({@link SnapshotCursor#held()}), and finishes with every change once and every key in
 * the source's state. Updates carry their own post-image, so a state delivered twice is seen as
 * such. Against the embedded server, or a real deployment given {@code -Dsluice.mongodb.uri}.
 */
class LaggingSnapshotStreamTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();
  private static final int DOCUMENTS = 2_000;
  private static final int CHANGES = 100_000;
  private static final int CHUNK = 100;
  private static final int BATCH = 500;

  private final String name = "lag" + COLLECTIONS.incrementAndGet();
  /**
   * The test's own writer, whose 100,000 updates are load, not what is tested: its reads may wait
   * longer than the test kit client's 10 s while the full suite loads the machine (a bulk of 100
   * timed out once there).
   */
  private final MongoClient writer = MongoClients.create(MongoClientSettings.builder()
      .applyConnectionString(new ConnectionString(MONGO.connectionString()))
      .applyToSocketSettings(b -> b.readTimeout(120, TimeUnit.SECONDS))
      .build());
  private final MongoCollection<BsonDocument> collection =
      writer.getDatabase("snapshots").getCollection(name, BsonDocument.class);
  private final List<FeedCursor<BsonDocument>> cursors = new ArrayList<>();

  @AfterEach
  void close() {
    cursors.forEach(FeedCursor::close);
    writer.close();
  }

  private MongoChangeFeed feed() {
    return MongoChangeFeed.builder(MONGO.client(), "snapshots", name)
        .fullDocument(FullDocument.WHEN_AVAILABLE).snapshotChunkSize(CHUNK).batchSize(BATCH).build();
  }

  private SnapshotCursor open(MongoChangeFeed feed, StartPoint start) {
    FeedCursor<BsonDocument> c = feed.open(PartitionSpec.single(), start);
    cursors.add(c);
    return (SnapshotCursor) c;
  }

  /** {@code DOCUMENTS} documents at version 1, with post-images, so each update carries its own state. */
  private void insert() {
    List<BsonDocument> docs = new ArrayList<>();
    for (int i = 0; i < DOCUMENTS; i++) {
      docs.add(new BsonDocument("_id", new BsonInt32(i)).append("version", new BsonInt64(1)));
    }
    collection.insertMany(docs);
    MONGO.client().getDatabase("snapshots").runCommand(new Document("collMod", name)
        .append("changeStreamPreAndPostImages", new Document("enabled", true)));
  }

  /** {@code CHANGES} updates, each a new version of one document, spread over every document. */
  private void lag() {
    List<WriteModel<BsonDocument>> updates = new ArrayList<>();
    for (int i = 0; i < CHANGES; i++) {
      updates.add(new UpdateOneModel<>(Filters.eq("_id", i % DOCUMENTS), Updates.inc("version", 1L)));
      // Each bulk well within the test client's 10 s read timeout on a busy machine: the test kit
      // applies a bulk under its one write lock while the stream reads (1,000 took over 10 s once,
      // in a full run with the module's two test JVMs).
      if (updates.size() == 100) {
        collection.bulkWrite(updates, new BulkWriteOptions().ordered(true));
        updates.clear();
      }
    }
  }

  /** What each key received, and what was delivered twice. */
  private static final class Received {
    final Map<String, Long> state = new HashMap<>();
    int updates;
    int snapshots;
    final List<String> repeated = new ArrayList<>();
    final List<String> wentBack = new ArrayList<>();

    void apply(ChangeEvent<BsonDocument> e) {
      if (e.operation() == Operation.UPDATE) {
        updates++;
      } else if (e.operation() == Operation.SNAPSHOT) {
        snapshots++;
      }
      assertThat(e.document()).as("%s carries its document", e).isNotNull();
      long version = e.document().getInt64("version").getValue();
      Long before = state.put(e.key(), version);
      if (before != null && before == version) {
        repeated.add(e.key() + "@" + version + " " + e.operation());
      } else if (before != null && before > version) {
        wentBack.add(e.key() + ": " + before + " then " + version + " " + e.operation());
      }
    }
  }

  private Map<String, Long> source() {
    Map<String, Long> out = new HashMap<>();
    collection.find().forEach(d -> out.put(MongoEvents.keyOf(d.get("_id")), d.getInt64("version").getValue()));
    return out;
  }

  /** Polls {@code cursor} until the snapshot is complete and every key is in the source's state. */
  private static void readToTheEnd(SnapshotCursor cursor, Received received, Map<String, Long> source) {
    long guard = System.nanoTime() + Duration.ofMinutes(5).toNanos();
    while (!(cursor.streaming() && received.state.equals(source)) && System.nanoTime() < guard) {
      cursor.poll(Duration.ofMillis(100)).forEach(received::apply);
    }
  }

  @Test
  void aSnapshotWhoseStreamLagsByAHundredThousandChangesFinishesHoldingAtMostAChunkAndABatch() {
    insert();
    SnapshotCursor cursor = open(feed(), StartPoint.snapshot());
    Received received = new Received();
    // The first chunk is read, and the stream opened at its low watermark.
    List<ChangeEvent<BsonDocument>> first = cursor.poll(Duration.ofMillis(100));
    assertThat(first).as("the first chunk").isNotEmpty().allMatch(e -> e.operation() == Operation.SNAPSHOT);
    first.forEach(received::apply);

    lag();
    Map<String, Long> source = source();
    readToTheEnd(cursor, received, source);

    assertThat(cursor.streaming()).as("the snapshot is complete").isTrue();
    assertThat(received.state).as("every key in the source's state").isEqualTo(source);
    assertThat(received.updates).as("every change written while the stream lagged, once").isEqualTo(CHANGES);
    assertThat(received.wentBack).as("keys that went back to an older state").isEmpty();
    assertThat(received.repeated).as("states delivered twice").isEmpty();
    assertThat(received.snapshots).as("documents handed out by the snapshot").isPositive();
    assertThat(cursor.mostHeld()).as("documents and changes the cursor held at once")
        .isLessThanOrEqualTo(CHUNK + BATCH);
  }

  @Test
  void aSnapshotRestartedWhileItsStreamCatchesUpGoesOnFromTheLastPositionHandedOut() {
    insert();
    MongoChangeFeed feed = feed();
    SnapshotCursor cursor = open(feed, StartPoint.snapshot());
    Received received = new Received();
    cursor.poll(Duration.ofMillis(100)).forEach(received::apply);
    lag();
    Map<String, Long> source = source();

    // Read until the stream hands out changes while a chunk waits for its window to pass; then
    // stop, as a crash does after the last change handed out was committed.
    Position last = null;
    int updatesWhileAChunkWaited = 0;
    long guard = System.nanoTime() + Duration.ofMinutes(5).toNanos();
    while (updatesWhileAChunkWaited < 3 * BATCH && System.nanoTime() < guard) {
      List<ChangeEvent<BsonDocument>> batch = cursor.poll(Duration.ofMillis(100));
      batch.forEach(received::apply);
      if (!batch.isEmpty()) {
        last = batch.get(batch.size() - 1).position();
        if (cursor.held() > 0 && batch.stream().allMatch(e -> e.operation() == Operation.UPDATE)) {
          updatesWhileAChunkWaited += batch.size();
        }
      }
    }
    assertThat(updatesWhileAChunkWaited).as("changes handed out while a chunk waited for the stream")
        .isGreaterThanOrEqualTo(3 * BATCH);
    assertThat(SnapshotProgress.isSnapshot(last)).as("stopped in the middle of the snapshot: %s", last).isTrue();
    int snapshotsBefore = received.snapshots;
    cursor.close();

    SnapshotCursor resumed = open(feed, StartPoint.after(last));
    readToTheEnd(resumed, received, source);

    assertThat(resumed.streaming()).as("the snapshot is complete").isTrue();
    assertThat(received.state).as("every key in the source's state").isEqualTo(source);
    assertThat(received.updates).as("every change written while the stream lagged, once").isEqualTo(CHANGES);
    assertThat(received.wentBack).as("keys that went back to an older state").isEmpty();
    // After a restart the cursor no longer knows which states its stream handed out: it may read
    // the documents of the chunk it was reading again, each once (docs/adr/0066).
    assertThat(received.repeated).as("states delivered again after the restart").hasSizeLessThanOrEqualTo(CHUNK);
    assertThat(received.snapshots - snapshotsBefore).as("documents the resumed snapshot handed out")
        .isLessThanOrEqualTo(DOCUMENTS - snapshotsBefore + CHUNK);
    assertThat(resumed.mostHeld()).as("documents and changes the resumed cursor held at once")
        .isLessThanOrEqualTo(CHUNK + BATCH);
  }
}
