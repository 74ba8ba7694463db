package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoDatabase;
import dev.sluice.feed.Operation;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 11 item 2: a dropped (renamed, {@code $out}-replaced) collection. The test kit's oplog
 * behaves as a real server on every (re)open: the drop, then {@code invalidate}; resuming after the
 * drop meets the invalidate again, {@code resumeAfter} the invalidate is refused, only
 * {@code startAfter} it goes on. Before, every partition ended with "the source ended the stream"
 * and no way on; now the policy decides, and the status says what happened and what to do.
 */
class DroppedCollectionTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String db = "dropped" + DATABASES.incrementAndGet();
  private final List<Listener<?>> listeners = new ArrayList<>();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
  }

  private MongoDatabase database() {
    return MONGO.client().getDatabase(db);
  }

  private void insert(String id) {
    database().getCollection("orders", BsonDocument.class).insertOne(new BsonDocument("_id", new BsonString(id)));
  }

  private Listener<BsonDocument> listener(MongoChangeFeed.OnInvalidate policy, List<String> seen) {
    Listener<BsonDocument> l = Listener.builder(
            MongoChangeFeed.builder(MONGO.client(), db, "orders").onInvalidate(policy).build(),
            MongoLeaseStore.builder(database()).build())
        .group("g")
        .leaseDuration(Duration.ofSeconds(2))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
        .bootstrap(BootstrapPolicy.oldest())
        .handler((change, fence) -> seen.add(change.operation() == Operation.OTHER ? "<drop>" : change.key()))
        .build();
    listeners.add(l);
    return l.start();
  }

  private static PartitionStatus only(Listener<?> l) {
    return l.status().get(0);
  }

  @Test
  void underStopThePartitionEndsSayingWhatHappenedAndHowToGoOnAndARestartEndsThereAgain() {
    List<String> seen = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> first = listener(MongoChangeFeed.OnInvalidate.STOP, seen);
    insert("a");
    await().atMost(Duration.ofSeconds(20)).until(() -> seen.contains("a"));
    database().getCollection("orders").drop();
    insert("b");

    await().atMost(Duration.ofSeconds(20)).until(() -> only(first).state() == PartitionState.ENDED);
    assertThat(seen).containsExactly("a", "<drop>");
    assertThat(only(first).error()).contains("dropped, renamed or replaced")
        .contains("onInvalidate(START_AFTER)").contains("service: onInvalidate: start-after");
    first.close();

    List<String> again = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> second = listener(MongoChangeFeed.OnInvalidate.STOP, again);
    await().atMost(Duration.ofSeconds(20)).until(() -> only(second).state() == PartitionState.ENDED);
    assertThat(again).as("b is not skipped past unseen: the partition stops before it").doesNotContain("b");
  }

  @Test
  void underStartAfterThePartitionGoesOnWithTheRecreatedCollectionAndARestartResumesAfterTheInvalidate() {
    List<String> seen = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> first = listener(MongoChangeFeed.OnInvalidate.START_AFTER, seen);
    insert("a");
    await().atMost(Duration.ofSeconds(20)).until(() -> seen.contains("a"));
    database().getCollection("orders").drop();
    insert("b");
    await().atMost(Duration.ofSeconds(20)).until(() -> seen.contains("b"));
    assertThat(seen).containsExactly("a", "<drop>", "b");
    assertThat(only(first).state()).isEqualTo(PartitionState.ACTIVE);
    await().atMost(Duration.ofSeconds(10)).until(() -> only(first).committed() != null
        && only(first).committed().token().contains("resumeAfter") && only(first).processed() == 3);
    first.close();

    database().getCollection("orders").drop();
    insert("c");
    List<String> after = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> second = listener(MongoChangeFeed.OnInvalidate.START_AFTER, after);
    await().atMost(Duration.ofSeconds(20)).until(() -> after.contains("c"));
    assertThat(after).as("resumed after b, through the second drop's invalidate").containsExactly("<drop>", "c");
    assertThat(only(second).state()).isEqualTo(PartitionState.ACTIVE);
  }
}
