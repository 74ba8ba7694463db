package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.feed.Operation;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 32 section 3 item 1: the oplog rolls past a partition's open change stream cursor while
 * it is behind (its next getMore answers 136 CappedPositionLost, as on a real server and in the
 * test kit). That is history lost, so the history-lost policy decides: by default the partition
 * stops, naming the cause; with RESNAPSHOT it repairs and goes on. Before, 136 was a permanent
 * feed error: FAILED under every policy, as "feed failed ... (not retryable)". The cursor is held
 * behind by its handler, which blocks on the first change while the test writes and trims. The
 * feed reads one change per batch, so that x2 and x3 are lost whatever a cursor reads ahead of its
 * handler (a shared reader's queue, ADR 0074; a read-ahead, ADR 0130): at most x1 is read before.
 */
class PositionLostWhileReadingTest {
  private final EmbeddedMongo server = EmbeddedMongo.start();
  private final MongoClient client = server.client();
  private final MongoCollection<Document> orders = client.getDatabase("shop").getCollection("orders");
  private final CountDownLatch holding = new CountDownLatch(1);
  private final CountDownLatch release = new CountDownLatch(1);
  private final List<String> seen = new CopyOnWriteArrayList<>();
  private final List<String> snapshots = new CopyOnWriteArrayList<>();
  private Listener<BsonDocument> listener;

  @AfterEach
  void cleanUp() {
    release.countDown();
    if (listener != null) {
      listener.close();
    }
    client.close();
    server.close();
  }

  private Listener<BsonDocument> start(HistoryLostPolicy policy) {
    listener = Listener.builder(MongoChangeFeed.builder(client, "shop", "orders").batchSize(1).build(),
            MongoLeaseStore.builder(client.getDatabase("shop")).build())
        .group("g")
        .leaseDuration(Duration.ofSeconds(3))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(BootstrapPolicy.latest())
        .onHistoryLost(policy)
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
        .handler((change, fence) -> {
          String id = change.key();
          if (id.equals("hold")) {
            holding.countDown();
            release.await(30, TimeUnit.SECONDS);
          }
          (change.operation() == Operation.SNAPSHOT ? snapshots : seen).add(id);
        })
        .build()
        .start();
    await().atMost(Duration.ofSeconds(30)).until(() -> status().state() == PartitionState.ACTIVE
        && status().committed() != null);
    return listener;
  }

  private PartitionStatus status() {
    return listener.status().get(0);
  }

  /**
   * The partition's cursor read "hold" and waits in its handler; x1..x3 are written, then lost
   * (x1 is delivered after all when the read-ahead read it before the loss).
   */
  private void loseWhatTheCursorHasNotRead() throws InterruptedException {
    orders.insertOne(new Document("_id", "hold"));
    assertThat(holding.await(30, TimeUnit.SECONDS)).as("the handler holds the first change").isTrue();
    for (int i = 1; i <= 3; i++) {
      orders.insertOne(new Document("_id", "x" + i));
    }
    assertThat(server.loseHistoryUpToNow()).isPositive();
    release.countDown();
  }

  @Test
  void byDefaultThePartitionStopsNamingTheLostPositionAndTheCause() throws Exception {
    start(HistoryLostPolicy.STOP);
    loseWhatTheCursorHasNotRead();

    await().atMost(Duration.ofSeconds(30)).until(() -> status().state() == PartitionState.FAILED);
    assertThat(status().error())
        .contains("History lost: cannot resume after")
        .contains("MongoDB error 136 CappedPositionLost")
        .contains("the oplog rolled past the open cursor's position")
        .contains("Policy STOP: partition stopped; no change was skipped");
    assertThat(seen).as("what was read before the loss, and nothing after it")
        .isIn(List.of("hold"), List.of("hold", "x1"));
  }

  @Test
  void withResnapshotThePartitionRepairsTheGapAndGoesOn() throws Exception {
    start(HistoryLostPolicy.RESNAPSHOT);
    loseWhatTheCursorHasNotRead();

    await().atMost(Duration.ofSeconds(30)).until(() -> snapshots.containsAll(List.of("hold", "x1", "x2", "x3")));
    assertThat(status().error()).contains("history lost; repairing").contains("136 CappedPositionLost");
    orders.insertOne(new Document("_id", "after"));
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.contains("after"));
    assertThat(status().state()).isEqualTo(PartitionState.ACTIVE);
    assertThat(seen).as("x1 only if it was read before the loss").doesNotContain("x2", "x3");
  }
}
