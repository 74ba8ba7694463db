package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A checkpoint of another collection restored onto a stream (issue 32 item 7). Real resume tokens
 * carry their collection's UUID, and so do the test kit's now; before, the test kit's tokens held
 * only a cluster time and such a checkpoint resumed silently, skipping every change of this
 * collection before the other's checkpoint. Both outcomes stop the partition even under
 * {@link HistoryLostPolicy#SKIP_TO_LATEST}, deliver nothing and leave the checkpoint where it was.
 * The answers are the server's own (the embedded one, or {@code -Dsluice.mongodb.uri}).
 */
class ResumeTokenOfAnotherStreamTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String db = "another" + UUID.randomUUID().toString().substring(0, 8);
  private final List<Listener<BsonDocument>> listeners = new ArrayList<>();

  @AfterEach
  void close() {
    listeners.forEach(Listener::close);
  }

  private Listener<BsonDocument> listen(String database, String collection, LeaseStore store, List<String> seen) {
    MongoClient client = MONGO.client();
    Listener<BsonDocument> l = Listener.builder(MongoChangeFeed.builder(client, database, collection).build(), store)
        .group("indexer")
        .leaseDuration(Duration.ofSeconds(2))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(50)))
        .bootstrap(BootstrapPolicy.latest())
        .onHistoryLost(HistoryLostPolicy.SKIP_TO_LATEST)
        .handler((e, f) -> seen.add(e.key()))
        .build();
    listeners.add(l);
    return l.start();
  }

  private void insert(String database, String collection, String id) {
    MONGO.client().getDatabase(database).getCollection(collection, BsonDocument.class)
        .insertOne(new BsonDocument("_id", new BsonString(id)));
  }

  /** The checkpoint a listener of {@code database.collection} commits after reading one change. */
  private Position checkpointOf(String database, String collection, LeaseStore store) {
    List<String> seen = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> other = listen(database, collection, store, seen);
    await().atMost(Duration.ofSeconds(20)).until(() -> other.status().get(0).state() == PartitionState.ACTIVE);
    insert(database, collection, "p1");
    await().atMost(Duration.ofSeconds(20)).until(() -> seen.contains("p1") && other.status().get(0).processed() == 1
        && other.status().get(0).committed() != null && other.status().get(0).committed().token().contains("resumeAfter"));
    Position checkpoint = other.status().get(0).committed();
    other.close();
    return checkpoint;
  }

  /** Writes {@code checkpoint} as the group's checkpoint of {@code stream}, as a restore would. */
  private static void restore(LeaseStore store, String stream, Position checkpoint) {
    Lease lease = store.tryAcquire("indexer/" + stream + "#0of1", "restore", Duration.ofSeconds(30)).orElseThrow();
    store.release(store.commit(lease, checkpoint));
  }

  @Test
  void aCheckpointOfAnotherCollectionOfTheDatabaseIsRefusedNamingBothAndNothingIsSkipped() {
    LeaseStore store = MongoLeaseStore.builder(MONGO.client().getDatabase(db)).build();
    insert(db, "orders", "o0"); // the collection exists
    Position ofPayments = checkpointOf(db, "payments", store);
    restore(store, db + ".orders", ofPayments);
    insert(db, "orders", "o1");

    List<String> delivered = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> orders = listen(db, "orders", store, delivered);
    await().atMost(Duration.ofSeconds(20)).until(() -> orders.status().get(0).state() == PartitionState.FAILED);
    PartitionStatus status = orders.status().get(0);
    assertThat(status.error())
        .contains("resume token is of collection " + db + ".payments")
        .contains("not of " + db + ".orders")
        .contains("Nothing was read or skipped")
        .contains("BootstrapPolicy.snapshot()")
        .doesNotContain("skipped to latest");
    insert(db, "orders", "o2");
    assertThat(delivered).isEmpty();
    assertThat(store.read("indexer/" + db + ".orders#0of1").orElseThrow().checkpoint())
        .as("the checkpoint stays as restored").isEqualTo(ofPayments);
  }

  @Test
  void aCheckpointOfACollectionElsewhereIsRefusedByTheServerWhenTheStreamPassesItAndNothingIsSkipped() {
    LeaseStore store = MongoLeaseStore.builder(MONGO.client().getDatabase(db)).build();
    String elsewhere = db + "x";
    Position ofElsewhere = checkpointOf(elsewhere, "orders", store);
    restore(store, db + ".orders", ofElsewhere);
    insert(db, "orders", "o1"); // after the other's checkpoint: the stream passes where its token would be

    List<String> delivered = new CopyOnWriteArrayList<>();
    Listener<BsonDocument> orders = listen(db, "orders", store, delivered);
    await().atMost(Duration.ofSeconds(20)).until(() -> orders.status().get(0).state() == PartitionState.FAILED);
    assertThat(orders.status().get(0).error())
        .contains(db + ".orders")
        .contains("error 280 ChangeStreamFatalError")
        .contains("the resume token was not found")
        .contains("Nothing was skipped")
        .doesNotContain("skipped to latest");
    assertThat(delivered).isEmpty();
    assertThat(store.read("indexer/" + db + ".orders#0of1").orElseThrow().checkpoint())
        .as("the checkpoint stays as restored").isEqualTo(ofElsewhere);
  }
}
