package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoClient;
import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.internal.Records;
import dev.sluice.kafka.connect.internal.TaskMetrics;
import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.source.SourceRecord;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A task's stop waits for its reading thread only so long (ADR 0129), then closes the partitions
 * under it: a pass that goes on after that must not open a cursor again, which would keep a
 * PostgreSQL slot or a MongoDB cursor open after the task stopped.
 */
class PartitionReaderCloseTest {
  private final EmbeddedMongo server = EmbeddedMongo.start();
  private final MongoClient client = server.client();
  private final TaskMetrics metrics = new TaskMetrics("closetest", 0, () -> 0L);

  @AfterEach
  void cleanUp() {
    metrics.close();
    client.close();
    server.close();
  }

  @Test
  void aReadAfterCloseOpensNoCursor() {
    SluiceSourceConfig config = new SluiceSourceConfig(Map.of("name", "closetest", "source.type", "mongodb",
        "mongodb.connection.string", server.connectionString(), "mongodb.database", "shop",
        "mongodb.collections", "orders"));
    PartitionReader<BsonDocument> reader = new PartitionReader<>(new Unit("orders", 0, 1),
        MongoChangeFeed.builder(client, "shop", "orders").build(), config,
        new Records<>(false, DocumentMapper.bson(), BsonDocument::toJson), metrics, "closetest", "owner", null,
        () -> { });
    reader.open(StartPoint.latest());
    assertThat(reader.isOpen()).isTrue();

    reader.close(); // the task's stop, on its own thread
    List<SourceRecord> out = new ArrayList<>();
    reader.read(out, Duration.ofMillis(50)); // the reading thread's pass after it
    reader.heartbeat(out, System.nanoTime());

    assertThat(reader.isOpen()).as("the cursor a late pass opened was closed at once").isFalse();
    assertThat(out).isEmpty();
  }
}
