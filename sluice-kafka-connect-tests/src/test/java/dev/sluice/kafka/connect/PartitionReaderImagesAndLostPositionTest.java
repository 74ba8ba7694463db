package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.internal.Records;
import dev.sluice.kafka.connect.internal.TaskMetrics;
import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 32 section 3 items 1 and 2, in the connector's reader: the oplog rolls past a partition's
 * open cursor (136 CappedPositionLost on its next getMore, as the test kit answers it) and the
 * history-lost policy decides, as for a lost offset; a change whose required pre-image the server
 * does not have (47) fails the task naming expireAfterSeconds, or is parked with its reason under
 * {@code mongodb.missing.image=park}. On a server of its own, whose oplog the test trims; the
 * reader is driven the way a task drives it, one {@code read} per poll.
 */
class PartitionReaderImagesAndLostPositionTest {
  private final EmbeddedMongo server = EmbeddedMongo.start();
  private final MongoClient client = server.client();
  private final MongoDatabase db = client.getDatabase("shop");
  private final MongoCollection<Document> orders = db.getCollection("orders");
  private final TaskMetrics metrics = new TaskMetrics("readertest", 0, () -> 0L);
  private final List<PartitionReader<BsonDocument>> readers = new ArrayList<>();

  @AfterEach
  void cleanUp() {
    readers.forEach(PartitionReader::close);
    metrics.close();
    client.close();
    server.close();
  }

  private PartitionReader<BsonDocument> reader(Map<String, String> extra, MongoChangeFeed.Builder feed) {
    Map<String, String> props = new HashMap<>(Map.of("name", "readertest", "source.type", "mongodb",
        "mongodb.connection.string", server.connectionString(), "mongodb.database", "shop",
        "mongodb.collections", "orders"));
    props.putAll(extra);
    SluiceSourceConfig config = new SluiceSourceConfig(props);
    PartitionReader<BsonDocument> r = new PartitionReader<>(new Unit("orders", 0, 1), feed.build(), config,
        new Records<>(false, DocumentMapper.bson(), BsonDocument::toJson), metrics, "readertest", "owner", null,
        () -> { });
    readers.add(r);
    return r;
  }

  private MongoChangeFeed.Builder feed() {
    return MongoChangeFeed.builder(client, "shop", "orders");
  }

  /** Polls {@code r} until {@code count} records (heartbeats left out) came, as a task does. */
  private static List<SourceRecord> read(PartitionReader<BsonDocument> r, int count) {
    List<SourceRecord> out = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
    while (out.size() < count) {
      assertThat(System.nanoTime()).as("%d records within 20 s, got %s", count, out).isLessThan(deadline);
      r.read(out, Duration.ofMillis(50));
    }
    return out;
  }

  private static List<String> keys(List<SourceRecord> records) {
    return records.stream().map(r -> String.valueOf(r.key())).toList();
  }

  /** The reader read "a" and stands after it; "b" is written and lost before its next read. */
  private PartitionReader<BsonDocument> behindALoss(Map<String, String> config) {
    PartitionReader<BsonDocument> r = reader(config, feed());
    r.open(StartPoint.latest());
    orders.insertOne(new Document("_id", "a"));
    assertThat(keys(read(r, 1))).singleElement().asString().contains("a");
    orders.insertOne(new Document("_id", "b"));
    assertThat(server.loseHistoryUpToNow()).isPositive();
    return r;
  }

  @Test
  void aCursorWhoseOplogPositionWasOverwrittenFailsTheTaskPerTheHistoryLostPolicy() {
    PartitionReader<BsonDocument> r = behindALoss(Map.of());
    assertThatThrownBy(() -> read(r, 1)).isInstanceOf(ConnectException.class)
        .hasMessageContaining("History lost")
        .hasMessageContaining("136 CappedPositionLost")
        .hasMessageContaining("history.lost.policy=fail")
        .hasMessageContaining("no change was skipped");
  }

  @Test
  void underSkipTheReaderContinuesAtTheLatestPosition() {
    PartitionReader<BsonDocument> r = behindALoss(Map.of("history.lost.policy", "skip"));
    List<SourceRecord> out = new ArrayList<>();
    r.read(out, Duration.ofMillis(50)); // meets the loss, re-opens at the latest position
    orders.insertOne(new Document("_id", "c"));
    List<SourceRecord> after = read(r, 1);
    assertThat(keys(after)).singleElement().asString().contains("c");
    assertThat(keys(out)).noneMatch(k -> k.contains("b"));
  }

  /** "a" updated before images were enabled, so its pre-image was never recorded; "b" after. */
  private void writeAChangeWithoutItsPreImage() {
    orders.insertOne(new Document("_id", "a").append("v", 1));
    orders.insertOne(new Document("_id", "b").append("v", 1));
    orders.updateOne(Filters.eq("_id", "a"), Updates.set("v", 2));
    db.runCommand(new Document("collMod", "orders").append("changeStreamPreAndPostImages",
        new Document("enabled", true)));
    orders.updateOne(Filters.eq("_id", "b"), Updates.set("v", 2));
  }

  @Test
  void aChangeWithoutItsRequiredPreImageFailsTheTaskNamingExpireAfterSecondsOrIsParkedWithItsReason() {
    writeAChangeWithoutItsPreImage();
    PartitionReader<BsonDocument> failing = reader(Map.of("mongodb.full.document.before.change", "required"),
        feed().fullDocumentBeforeChange(com.mongodb.client.model.changestream.FullDocumentBeforeChange.REQUIRED));
    // The first batch already holds the change: the task fails as it opens (later, as it reads).
    assertThatThrownBy(() -> {
      failing.open(StartPoint.oldest());
      read(failing, 4);
    }).isInstanceOf(RuntimeException.class)
        .hasMessageContaining("error 47 NoMatchingDocument")
        .hasMessageContaining("expireAfterSeconds")
        .hasMessageContaining("mongodb.missing.image=park");

    PartitionReader<BsonDocument> parking = reader(Map.of("mongodb.full.document.before.change", "required",
            "mongodb.missing.image", "park", "undecodable.policy", "park", "parked.topic", "parked"),
        feed().fullDocumentBeforeChange(com.mongodb.client.model.changestream.FullDocumentBeforeChange.REQUIRED)
            .onMissingImage(MongoChangeFeed.OnMissingImage.PARK));
    parking.open(StartPoint.oldest());
    List<SourceRecord> records = read(parking, 4);
    assertThat(records).extracting(SourceRecord::topic)
        .containsExactly("sluice.shop.orders", "sluice.shop.orders", "parked", "sluice.shop.orders");
    assertThat(records.get(2).value().toString()).contains("pre-image missing (expired or never recorded)");
    assertThat(records.get(3).value().toString()).contains("\"v\": 1"); // b's update, with its pre-image
  }
}
