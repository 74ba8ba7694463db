package dev.sluice.testkit.mongo;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoCursor;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Reply batches hold at most 16 MiB of documents, as a real server's do, whatever the batch size
 * asked: a read of large documents takes as many round trips as on a real server. Runs against a
 * real deployment too ({@code -Dsluice.mongodb.uri}).
 */
class ReplyBatchesTest {
  private static InMemoryMongo mongo;
  private static final AtomicInteger getMores = new AtomicInteger();
  private static MongoClient counted;

  @BeforeAll
  static void start() {
    mongo = new InMemoryMongo();
    counted = MongoClients.create(MongoClientSettings.builder().applyConnectionString(new ConnectionString(mongo.uri()))
        .addCommandListener(new CommandListener() {
          @Override
          public void commandStarted(CommandStartedEvent event) {
            if (event.getCommandName().equals("getMore")) {
              getMores.incrementAndGet();
            }
          }
        }).build());
  }

  @AfterAll
  static void stop() {
    counted.close();
    mongo.close();
  }

  /** {@code count} documents of about 1 MB each, {@code _id} 0 .. count-1. */
  private static MongoCollection<Document> large(int count) {
    String name = mongo.freshDatabase().getName();
    MongoCollection<Document> c = counted.getDatabase(name).getCollection("large");
    String megabyte = "x".repeat(1_000_000);
    for (int i = 0; i < count; i++) {
      c.insertOne(new Document("_id", i).append("payload", megabyte));
    }
    return c;
  }

  @Test
  void aReadOfLargeDocumentsTakesARoundTripPerSixteenMebibytes() {
    MongoCollection<Document> c = large(40);
    getMores.set(0);
    List<Integer> ids = new ArrayList<>();
    c.find().sort(new Document("_id", 1)).limit(40).batchSize(40).forEach(d -> ids.add(d.getInteger("_id")));

    assertThat(ids).as("every document, in order").hasSize(40).isSorted();
    // 16 documents of 1 MB fit in 16 MiB: 40 documents are three batches, the find and two getMores.
    assertThat(getMores.get()).as("getMores after the find").isEqualTo(2);
  }

  @Test
  void aCursorClosedBeforeItsLastBatchIsKilledAndSmallBatchesAreUntouched() {
    MongoCollection<Document> c = large(20);
    getMores.set(0);
    try (MongoCursor<Document> cursor = c.find().batchSize(20).iterator()) {
      assertThat(cursor.next().getInteger("_id")).isNotNull();
    }
    assertThat(getMores.get()).as("no getMore for the first batch").isZero();
    List<Document> small = new ArrayList<>();
    c.find().projection(new Document("_id", 1)).batchSize(20).into(small);
    assertThat(small).hasSize(20);
    assertThat(getMores.get()).as("small documents come in one batch").isZero();
  }
}
