package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import com.mongodb.event.CommandSucceededEvent;
import dev.sluice.feed.Operation;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The errors of snapshot reads that retrying cures (issue 32, section 3 item 4; {@code
 * docs/adr/0085}): 246 SnapshotUnavailable (after a {@code collMod}, such as the one that enables
 * images) is retried with back-off while the partition's status shows it; 239 SnapshotTooOld (a
 * read longer than the server's snapshot history) is read again at a new snapshot time and with a
 * smaller chunk. Both only happen on the snapshot-read path (a session with {@code snapshot: true}),
 * which these tests check they take; the errors come from the {@code failCommand} fail point, as
 * they would on a real replica set started with test commands ({@code -Dsluice.mongodb.uri}).
 */
class SnapshotErrorsTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();
  private static final int DOCUMENTS = 300;

  private final String name = "snapshotErrors" + COLLECTIONS.incrementAndGet();
  private final MongoCollection<Document> collection = MONGO.client().getDatabase("snapshots").getCollection(name);
  /** The chunk reads the feed sent: each find of the collection. */
  private final List<BsonDocument> finds = new CopyOnWriteArrayList<>();
  private final List<Integer> requestIds = new CopyOnWriteArrayList<>();
  /** The time each chunk read was read at, as its reply names it, by request id. */
  private final Map<Integer, BsonTimestamp> readAt = new ConcurrentHashMap<>();
  private final List<AutoCloseable> closing = new ArrayList<>();
  private final Map<Integer, Integer> delivered = new ConcurrentHashMap<>();

  @AfterEach
  void close() throws Exception {
    for (AutoCloseable c : closing) {
      c.close();
    }
    failPoint("off", null);
  }

  /** The feed's client: every find of the collection is recorded. */
  private MongoClient client() {
    MongoClient c = MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(MONGO.connectionString()))
        .addCommandListener(new CommandListener() {
          @Override
          public void commandStarted(CommandStartedEvent event) {
            if (event.getCommandName().equals("find") && name.equals(event.getCommand().getString("find").getValue())) {
              finds.add(event.getCommand().clone());
              requestIds.add(event.getRequestId());
            }
          }

          @Override
          public void commandSucceeded(CommandSucceededEvent event) {
            if (event.getCommandName().equals("find") && event.getResponse().get("cursor") instanceof BsonDocument c
                && c.get("atClusterTime") != null) {
              readAt.put(event.getRequestId(), c.getTimestamp("atClusterTime"));
            }
          }
        }).build());
    closing.add(c);
    return c;
  }

  /** Every find of the collection answers {@code code}, in {@code mode}, as a real server's fail point does. */
  private void failPoint(Object mode, Integer code) {
    Document command = new Document("configureFailPoint", "failCommand").append("mode", mode);
    if (code != null) {
      command.append("data", new Document("failCommands", List.of("find")).append("errorCode", code)
          .append("namespace", "snapshots." + name));
    }
    MONGO.client().getDatabase("admin").runCommand(command);
  }

  private Listener<BsonDocument> listen() {
    List<Document> docs = new ArrayList<>();
    for (int i = 0; i < DOCUMENTS; i++) {
      docs.add(new Document("_id", i).append("v", 1));
    }
    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(client(), "snapshots", name).snapshotChunkSize(100).build(),
            MongoLeaseStore.builder(MONGO.client().getDatabase("snapshots")).collection(name + "_leases").build())
        .group("errors").owner("only").partitions(1)
        .leaseDuration(Duration.ofSeconds(5)).acquireInterval(Duration.ofMillis(100)).pollWait(Duration.ofMillis(50))
        .bootstrap(BootstrapPolicy.snapshot())
        .checkpoint(CheckpointPolicy.every(10, Duration.ofMillis(200)))
        .handler((change, fence) -> {
          if (change.operation() == Operation.SNAPSHOT) {
            delivered.merge(change.documentKey().getInt32("_id").getValue(), 1, Integer::sum);
          }
        })
        .build();
    closing.add(listener);
    collection.insertMany(docs);
    return listener;
  }

  private PartitionStatus status(Listener<BsonDocument> listener) {
    return listener.status().get(0);
  }

  /** Every chunk was read in a snapshot session: the path on which a real server gives 239 and 246. */
  private void assertReadsAtSnapshots() {
    assertThat(finds).as("chunk reads").isNotEmpty();
    assertThat(finds).as("chunk reads at readConcern snapshot (the test kit must report a server with sessions,"
            + " wire version 13+, for the driver to open snapshot sessions)")
        .allSatisfy(f -> assertThat(f.getDocument("readConcern", new BsonDocument()).getString("level", null))
            .isNotNull().extracting(l -> l.getValue()).isEqualTo("snapshot"));
  }

  @Test
  void snapshotUnavailableIsRetriedWithBackOffWhileTheStatusShowsItAndTheSnapshotEndsWithEveryDocumentOnce() {
    Listener<BsonDocument> listener = listen();
    failPoint("alwaysOn", 246);
    listener.start();

    await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
      PartitionStatus s = status(listener);
      assertThat(s.state()).isEqualTo(PartitionState.RETRYING);
      assertThat(s.attempts()).as("the attempt the status shows").isGreaterThanOrEqualTo(3);
      assertThat(s.nextAttemptAt()).as("the next try").isNotNull();
      assertThat(s.error()).contains("246 SnapshotUnavailable").contains("retrying with back-off");
    });
    assertThat(delivered).as("nothing delivered while every read fails").isEmpty();

    failPoint("off", null);
    await().atMost(Duration.ofSeconds(60)).until(() -> delivered.size() == DOCUMENTS);
    assertThat(delivered).as("every document once").allSatisfy((id, times) -> assertThat(times).isOne());
    assertThat(status(listener).state()).isEqualTo(PartitionState.ACTIVE);
    assertReadsAtSnapshots();
  }

  @Test
  void snapshotTooOldIsReadAgainAtANewSnapshotTimeWithASmallerChunk() {
    Listener<BsonDocument> listener = listen();
    failPoint(new Document("times", 1), 239);
    listener.start();

    await().atMost(Duration.ofSeconds(60)).until(() -> delivered.size() == DOCUMENTS);
    assertThat(delivered).as("every document once").allSatisfy((id, times) -> assertThat(times).isOne());
    PartitionStatus s = status(listener);
    assertThat(s.state()).isEqualTo(PartitionState.ACTIVE);
    assertThat(s.error()).contains("239 SnapshotTooOld").contains("new snapshot time").contains("50 documents at most");
    assertReadsAtSnapshots();
    BsonDocument failed = finds.get(0);
    BsonDocument retried = finds.get(1);
    assertThat(failed.getInt32("limit").getValue()).isEqualTo(100);
    assertThat(retried.getInt32("limit").getValue()).as("the chunk read again is smaller").isEqualTo(50);
    assertThat(retried.getDocument("readConcern").containsKey("atClusterTime"))
        .as("the read again lets the server pick a new time").isFalse();
    assertThat(readAt).as("the failed read has no time").doesNotContainKey(requestIds.get(0));
    assertThat(readAt.get(requestIds.get(1))).as("the time the server picked for the read again").isNotNull();
  }

}
