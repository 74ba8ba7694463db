package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Aggregates;
import com.mongodb.client.model.Filters;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.internal.MongoServerTime;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 12 items 3 and 4 on a server (the embedded one, or a real one with
 * {@code -Dsluice.mongodb.uri}): a quiet collection and one whose changes are all filtered out
 * advance their checkpoints while a neighbour collection is busy (post-batch resume tokens), so
 * their checkpoints keep up with the oplog; and the lag is how far processing is behind the source,
 * zero for a caught-up idle listener, growing while a handler is stuck.
 */
class HeartbeatAndLagTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final List<Listener<?>> listeners = new ArrayList<>();
  private final String db = "heartbeat" + DATABASES.incrementAndGet();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
  }

  private MongoDatabase database() {
    return MONGO.client().getDatabase(db);
  }

  private Listener<BsonDocument> listener(MongoChangeFeed feed, CheckpointPolicy checkpoint,
      dev.sluice.listener.Handler<BsonDocument> handler) {
    Listener<BsonDocument> l = Listener.builder(feed, MongoLeaseStore.builder(database()).build())
        .group("g")
        .owner("one")
        .leaseDuration(Duration.ofSeconds(5))
        .renewInterval(Duration.ofSeconds(1))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(100))
        .checkpoint(checkpoint)
        .bootstrap(BootstrapPolicy.latest())
        .handler(handler)
        .build();
    listeners.add(l);
    return l.start();
  }

  private Position checkpointOf(String collection) {
    LeaseStore leases = MongoLeaseStore.builder(database()).build();
    return leases.read("g/" + db + "." + collection + "#0of1").map(r -> r.checkpoint()).orElse(null);
  }

  /** The cluster time of the next change written to {@code collection}, read from its stream. */
  private Instant timeOfAWriteTo(String collection, String id) {
    MongoChangeFeed feed = MongoChangeFeed.builder(MONGO.client(), db, collection).build();
    try (FeedCursor<BsonDocument> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      database().getCollection(collection).insertOne(new Document("_id", id));
      List<ChangeEvent<BsonDocument>> read = new ArrayList<>();
      await().atMost(Duration.ofSeconds(10)).until(() -> read.addAll(c.poll(Duration.ofMillis(200))));
      return read.get(0).position().time();
    }
  }

  @Test
  void aQuietCollectionAndAFullyFilteredOneKeepTheirCheckpointsUpWithABusyNeighbour() {
    List<String> quietSeen = new CopyOnWriteArrayList<>();
    List<String> filteredSeen = new CopyOnWriteArrayList<>();
    CheckpointPolicy heartbeat = CheckpointPolicy.defaults().withHeartbeat(Duration.ofMillis(200));
    listener(MongoChangeFeed.builder(MONGO.client(), db, "quiet").build(), heartbeat,
        (change, fence) -> quietSeen.add(change.key()));
    listener(MongoChangeFeed.builder(MONGO.client(), db, "filtered")
            .pipeline(List.of(Aggregates.match(Filters.eq("operationType", "delete")))).build(), heartbeat,
        (change, fence) -> filteredSeen.add(change.key()));
    await().atMost(Duration.ofSeconds(30))
        .until(() -> checkpointOf("quiet") != null && checkpointOf("filtered") != null);
    Position quietAtStart = checkpointOf("quiet");
    Position filteredAtStart = checkpointOf("filtered");

    // The neighbour is busy; the filtered collection gets only changes its pipeline drops.
    for (int i = 0; i < 20; i++) {
      database().getCollection("busy").insertOne(new Document("_id", "b" + i));
      database().getCollection("filtered").insertOne(new Document("_id", "f" + i));
    }
    Instant marker = timeOfAWriteTo("busy", "marker");

    await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
      Position quiet = checkpointOf("quiet");
      Position filtered = checkpointOf("filtered");
      assertThat(quiet.token()).as("quiet checkpoint moved").isNotEqualTo(quietAtStart.token());
      assertThat(filtered.token()).as("filtered checkpoint moved").isNotEqualTo(filteredAtStart.token());
      assertThat(quiet.time()).as("quiet checkpoint time").isAfterOrEqualTo(marker);
      assertThat(filtered.time()).as("filtered checkpoint time").isAfterOrEqualTo(marker);
    });
    assertThat(quietSeen).isEmpty();
    assertThat(filteredSeen).isEmpty();

    // Resuming at those checkpoints misses nothing written afterwards.
    listeners.forEach(Listener::close);
    listeners.clear();
    database().getCollection("quiet").insertOne(new Document("_id", "q1"));
    database().getCollection("filtered").insertOne(new Document("_id", "f-deleted"));
    database().getCollection("filtered").deleteOne(Filters.eq("_id", "f-deleted"));
    listener(MongoChangeFeed.builder(MONGO.client(), db, "quiet").build(), heartbeat,
        (change, fence) -> quietSeen.add(change.key()));
    listener(MongoChangeFeed.builder(MONGO.client(), db, "filtered")
            .pipeline(List.of(Aggregates.match(Filters.eq("operationType", "delete")))).build(), heartbeat,
        (change, fence) -> filteredSeen.add(change.key()));
    await().atMost(Duration.ofSeconds(30)).until(() -> quietSeen.size() == 1 && filteredSeen.size() == 1);
    assertThat(quietSeen).containsExactly("q1");
    assertThat(filteredSeen).containsExactly("f-deleted");
  }

  @Test
  void lagIsZeroWhenCaughtUpAndIdleAndGrowsWithTheSourceWhileTheHandlerIsStuck() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    List<String> seen = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> l = listener(MongoChangeFeed.builder(MONGO.client(), db, "orders").build(),
        CheckpointPolicy.everyChange(), (change, fence) -> {
          if (change.key().equals("stuck")) {
            release.await(60, TimeUnit.SECONDS);
          }
          seen.add(change.key());
        });
    // Started at latest: write once the start position is pinned, or the change may come before it.
    await().atMost(Duration.ofSeconds(30)).until(() -> status(l).state() == PartitionState.ACTIVE
        && status(l).committed() != null);
    database().getCollection("orders").insertOne(new Document("_id", "first"));
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.contains("first"));
    await().atMost(Duration.ofSeconds(10)).until(() -> status(l).lag().isZero());

    database().getCollection("orders").insertOne(new Document("_id", "stuck"));
    Instant stuckAt = MongoServerTime.now(database());
    // Changes keep arriving while the handler is stuck; the source moves on for three seconds.
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200)).until(() -> {
      database().getCollection("orders").insertOne(new Document("n", 1));
      return MongoServerTime.now(database()).isAfter(stuckAt.plusSeconds(3));
    });
    await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
      PartitionStatus s = status(l);
      assertThat(s.state()).isEqualTo(PartitionState.ACTIVE);
      assertThat(s.lag()).as("lag while the handler is stuck").isGreaterThanOrEqualTo(Duration.ofSeconds(2));
    });
    PartitionStatus stuck = status(l);
    assertThat(stuck.historyLeft()).as("the server's oplog window is known").isNotNull();

    release.countDown();
    await().atMost(Duration.ofSeconds(30)).untilAsserted(() ->
        assertThat(status(l).lag()).as("lag once caught up and idle").isZero());
    assertThat(seen).contains("stuck");
  }

  private static PartitionStatus status(Listener<?> l) {
    return l.status().get(0);
  }
}
