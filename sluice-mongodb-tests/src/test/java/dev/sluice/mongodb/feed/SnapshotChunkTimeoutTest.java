package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.mongo.FailCommand;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Snapshot reads bounded per round trip, not per chunk (issue 32, section 3 item 3; {@code
 * docs/adr/0085}). The server is slowed and failed with the {@code failCommand} fail point, as on a
 * real deployment started with test commands ({@code -Dsluice.mongodb.uri}); the test kit's reply
 * batches hold 16 MiB at most, as a real server's, so a chunk of large documents takes several
 * round trips here too.
 */
class SnapshotChunkTimeoutTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();
  private static final String APP = "slow-snapshot-reads";

  private final String name = "timeouts" + COLLECTIONS.incrementAndGet();
  private final MongoCollection<Document> collection = MONGO.client().getDatabase("snapshots").getCollection(name);
  private final List<AutoCloseable> closing = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (AutoCloseable c : closing) {
      c.close();
    }
    MONGO.client().getDatabase("admin").runCommand(new Document("configureFailPoint", "failCommand").append("mode", "off"));
  }

  /** A client of its own, named for the fail point, whose operations time out after {@code timeout}. */
  private MongoClient client(Duration timeout) {
    MongoClient c = MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(MONGO.connectionString()))
        .applicationName(APP)
        .timeout(timeout.toMillis(), TimeUnit.MILLISECONDS)
        .build());
    closing.add(c);
    return c;
  }

  @Test
  void aChunkThatTakesLongerInAllThanTheRoundTripBoundIsReadWhole() {
    // 40 documents of 1 MB: a real server (and the test kit) returns them in three batches of at
    // most 16 MiB, a find and two getMores.
    String megabyte = "x".repeat(1_000_000);
    for (int i = 0; i < 40; i++) {
      collection.insertOne(new Document("_id", i).append("payload", megabyte));
    }
    Duration roundTripBound = Duration.ofSeconds(3);
    MongoChangeFeed feed = MongoChangeFeed.builder(client(roundTripBound), "snapshots", name)
        .snapshotChunkSize(50).build();
    // Each round trip of this client takes 1.2 s: the chunk's three take 3.6 s, each within 3 s.
    closing.add(FailCommand.on("find", "getMore").block(Duration.ofMillis(1_200)).appName(APP).alwaysOn()
        .enable(MONGO.client()));
    FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.snapshot());
    closing.add(cursor);

    Map<Object, Integer> read = new ConcurrentHashMap<>();
    long guard = System.nanoTime() + Duration.ofMinutes(2).toNanos();
    while (read.size() < 40 && System.nanoTime() < guard) {
      for (ChangeEvent<BsonDocument> e : cursor.poll(Duration.ofMillis(100))) {
        assertThat(e.operation()).isEqualTo(Operation.SNAPSHOT);
        read.merge(e.documentKey().getInt32("_id").getValue(), 1, Integer::sum);
      }
    }
    assertThat(read).as("every document read, once").hasSize(40).allSatisfy((id, times) -> assertThat(times).isOne());
  }

  @Test
  void aRoundTripThatTimesOutMakesTheNextReadSmallerShowsTheRetryAndTheSnapshotEndsWithEveryDocumentOnce() {
    int documents = 300;
    List<Document> docs = new ArrayList<>();
    for (int i = 0; i < documents; i++) {
      docs.add(new Document("_id", i).append("v", 1));
    }
    collection.insertMany(docs);
    // Every find of the collection fails as a read past its time limit does (50 MaxTimeMSExpired).
    MONGO.client().getDatabase("admin").runCommand(new Document("configureFailPoint", "failCommand")
        .append("mode", "alwaysOn")
        .append("data", new Document("failCommands", List.of("find")).append("errorCode", 50)
            .append("namespace", "snapshots." + name)));

    Map<Integer, Integer> delivered = new ConcurrentHashMap<>();
    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(MONGO.client(), "snapshots", name).snapshotChunkSize(100).build(),
            MongoLeaseStore.builder(MONGO.client().getDatabase("snapshots")).collection(name + "_leases").build())
        .group("timeouts").owner("only").partitions(1)
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
    listener.start();

    // Meanwhile the partition is held and its status shows the retry, its attempt and the smaller read.
    await().atMost(Duration.ofSeconds(60)).untilAsserted(() -> {
      PartitionStatus s = listener.status().get(0);
      assertThat(s.state()).isEqualTo(PartitionState.RETRYING);
      assertThat(s.attempts()).as("the attempt the status shows").isGreaterThanOrEqualTo(3);
      assertThat(s.nextAttemptAt()).as("the next try").isNotNull();
      assertThat(s.error()).contains("timed out");
      // 100 halved at each attempt: 50, 25, 12, ...
      assertThat(number("with (\\d+) documents at most", s.error())).as("the size of the next read")
          .isEqualTo(Math.max(1, 100 >> s.attempts()));
    });
    assertThat(delivered).as("nothing delivered while every read fails").isEmpty();

    MONGO.client().getDatabase("admin").runCommand(new Document("configureFailPoint", "failCommand").append("mode", "off"));
    await().atMost(Duration.ofSeconds(60)).until(() -> delivered.size() == documents);
    assertThat(delivered).as("every document once").allSatisfy((id, times) -> assertThat(times).isOne());
    assertThat(listener.status().get(0).state()).isEqualTo(PartitionState.ACTIVE);
  }

  /** The number a status error names where {@code pattern}'s group is. */
  private static int number(String pattern, String error) {
    java.util.regex.Matcher m = java.util.regex.Pattern.compile(pattern).matcher(error);
    assertThat(m.find()).as("%s in %s", pattern, error).isTrue();
    return Integer.parseInt(m.group(1));
  }
}
