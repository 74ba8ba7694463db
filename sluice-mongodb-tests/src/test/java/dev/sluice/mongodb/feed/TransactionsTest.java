package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoDatabase;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.RawBsonDocument;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Multi-document transactions (issue 32 item 10): a real server logs one as one {@code applyOps}
 * entry whose changes share one cluster time and differ by their index in it ({@code txnOpIndex}
 * in their tokens), and ends a batch without a change of the stream with a high-water-mark token.
 * The test kit does both now; these run against it, or a real deployment given
 * {@code -Dsluice.mongodb.uri}.
 */
class TransactionsTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String dbName = "txn" + UUID.randomUUID().toString().substring(0, 8);
  private final MongoDatabase db = MONGO.client().getDatabase(dbName);
  private final List<AutoCloseable> open = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (AutoCloseable c : open) {
      c.close();
    }
  }

  private static BsonDocument doc(String id, int v) {
    return new BsonDocument("_id", new BsonString(id)).append("v", new BsonInt32(v));
  }

  private void commit(List<BsonDocument> commands) {
    InTransaction.commit(MONGO.client(), db, commands);
  }

  private Listener<BsonDocument> listener(String group, LeaseStore store, Map<String, Position> seen,
      CountDownLatch holdAt4) {
    Listener<BsonDocument> l = Listener.builder(MongoChangeFeed.builder(MONGO.client(), dbName, "orders").batchSize(2).build(),
            store)
        .group(group)
        .leaseDuration(Duration.ofSeconds(5))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(20)))
        .bootstrap(BootstrapPolicy.latest())
        .handler((e, f) -> {
          seen.put(e.key(), e.position());
          if (holdAt4 != null && e.key().equals("t4")) {
            holdAt4.await(30, TimeUnit.SECONDS); // the listener stops here, after committing t3
          }
        })
        .build();
    open.add(l);
    return l.start();
  }

  @Test
  void aListenerThatCommittedACheckpointAfterTheThirdChangeOfATransactionResumesAtTheFourth() {
    LeaseStore store = MongoLeaseStore.builder(db).build();
    db.getCollection("orders", BsonDocument.class).insertOne(doc("o0", 0));
    Map<String, Position> first = new ConcurrentHashMap<>();
    CountDownLatch release = new CountDownLatch(1);
    Listener<BsonDocument> crashing = listener("g", store, first, release);
    await().atMost(Duration.ofSeconds(20)).until(() -> crashing.status().get(0).state() == PartitionState.ACTIVE);
    List<BsonDocument> writes = new ArrayList<>();
    for (int i = 1; i <= 10; i++) {
      writes.add(InTransaction.insert("orders", doc("t" + i, i)));
    }
    commit(writes);

    await().atMost(Duration.ofSeconds(20)).until(() -> first.containsKey("t4")
        && first.get("t3").equals(crashing.status().get(0).committed()));
    Position checkpoint = crashing.status().get(0).committed();
    assertThat(first.keySet()).containsExactlyInAnyOrder("t1", "t2", "t3", "t4");
    // Its checkpoint, as a crash leaves it, is where a restarted listener starts.
    Lease lease = store.tryAcquire("restarted/" + dbName + ".orders#0of1", "restore", Duration.ofSeconds(30)).orElseThrow();
    store.release(store.commit(lease, checkpoint));
    release.countDown();
    db.getCollection("orders", BsonDocument.class).insertOne(doc("after", 11));

    Map<String, Position> second = java.util.Collections.synchronizedMap(new LinkedHashMap<>());
    listener("restarted", store, second, null);
    await().atMost(Duration.ofSeconds(20)).until(() -> second.containsKey("after"));
    assertThat(new ArrayList<>(second.keySet()))
        .containsExactly("t4", "t5", "t6", "t7", "t8", "t9", "t10", "after");
  }

  @Test
  void anIdleStreamMovesToTheHighWaterMarkOfAnEmptyBatchAndResumesThereWithNothingLostOrRepeated() {
    db.getCollection("orders", BsonDocument.class).insertOne(doc("o0", 0));
    MongoChangeFeed feed = MongoChangeFeed.builder(MONGO.client(), dbName, "orders").build();
    Position idle;
    try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      Position start = cursor.position();
      commit(List.of(InTransaction.insert("elsewhere", doc("x1", 1)), InTransaction.insert("elsewhere", doc("x2", 2))));
      await().atMost(Duration.ofSeconds(10)).until(() -> cursor.poll(Duration.ofMillis(20)).isEmpty()
          && !cursor.position().equals(start));
      idle = cursor.position();
    }
    BsonDocument token = StreamStart.fromPosition(idle).resumeAfter();
    ResumeTokenData mark = ResumeTokenData.of(token).orElseThrow();
    assertThat(mark.highWaterMark()).as("a batch without a change of the stream ends at a high-water mark: %s", token)
        .isTrue();
    assertThat(mark.uuid()).isNull();

    commit(List.of(InTransaction.insert("orders", doc("n1", 1)), InTransaction.insert("orders", doc("n2", 2))));
    try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.after(idle))) {
      List<String> keys = new ArrayList<>();
      await().atMost(Duration.ofSeconds(10)).until(() -> {
        cursor.poll(Duration.ofMillis(20)).forEach(e -> keys.add(e.key()));
        return keys.size() >= 2;
      });
      assertThat(cursor.poll(Duration.ofMillis(50))).isEmpty();
      assertThat(keys).containsExactly("n1", "n2");
    }
  }

  /**
   * The source, with a transaction committed inside the window of the snapshot's first read:
   * after its low watermark and before the read, so that the read's high watermark is the
   * transaction's own cluster time (on a real cluster a write landing there; staged here for
   * the one read, as no fail point can place a commit between two commands of the feed).
   */
  private static final class TransactionInTheWindow implements StreamSource {
    private final DriverStreamSource real;
    private final Runnable transaction;
    private final AtomicBoolean done = new AtomicBoolean();

    TransactionInTheWindow(DriverStreamSource real, Runnable transaction) {
      this.real = real;
      this.transaction = transaction;
    }

    @Override
    public com.mongodb.client.MongoChangeStreamCursor<RawBsonDocument> open(StreamStart start) {
      return real.open(start);
    }

    @Override
    public Optional<BsonTimestamp> oldestOplogTime() {
      return real.oldestOplogTime();
    }

    @Override
    public Instant serverNow() {
      return real.serverNow();
    }

    @Override
    public Optional<BsonTimestamp> newestOperationTime() {
      return real.newestOperationTime();
    }

    @Override
    public SnapshotChunk readChunk(BsonValue afterId, SnapshotScope scope, int limit) {
      if (done.getAndSet(true)) {
        return real.readChunk(afterId, scope, limit);
      }
      BsonTimestamp low = real.readBound();
      transaction.run();
      SnapshotChunk read = real.readChunk(afterId, scope, limit);
      return new SnapshotChunk(read.documents(), low, read.high());
    }
  }

  @Test
  void aTransactionAtTheSnapshotsHighWatermarkIsReadWholeBeforeTheDocumentsSoNoStateIsHandedOutTwice() {
    var documents = db.getCollection("orders", BsonDocument.class);
    for (int i = 1; i <= 5; i++) {
      documents.insertOne(doc("k" + i, 0));
    }
    MongoChangeFeed.Builder builder = MongoChangeFeed.builder(MONGO.client(), dbName, "orders").batchSize(2)
        .snapshotChunkSize(100);
    // Four changes at one cluster time: the stream's batches of two end inside the transaction.
    Runnable transaction = () -> commit(List.of(
        InTransaction.replace("orders", new BsonString("k1"), doc("k1", 1)),
        InTransaction.replace("orders", new BsonString("k2"), doc("k2", 1)),
        InTransaction.replace("orders", new BsonString("k3"), doc("k3", 1)),
        InTransaction.replace("orders", new BsonString("k4"), doc("k4", 1))));
    MongoChangeFeedImpl feed = new MongoChangeFeedImpl(CursorSettings.of(builder),
        new TransactionInTheWindow(new DriverStreamSource(builder), transaction));

    Map<String, List<String>> handedOut = new LinkedHashMap<>();
    try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.snapshot())) {
      await().atMost(Duration.ofSeconds(20)).until(() -> {
        for (ChangeEvent<BsonDocument> e : cursor.poll(Duration.ofMillis(20))) {
          handedOut.computeIfAbsent(e.key(), k -> new ArrayList<>())
              .add(e.operation() + " v" + e.document().getInt32("v").getValue());
        }
        return handedOut.size() == 5 && handedOut.get("k4").contains("REPLACE v1") && cursor.caughtUp();
      });
    }
    // Each state once, in order: the transaction's changes deliver k1..k4, the read only k5.
    assertThat(handedOut).containsExactlyInAnyOrderEntriesOf(Map.of(
        "k1", List.of(Operation.REPLACE + " v1"),
        "k2", List.of(Operation.REPLACE + " v1"),
        "k3", List.of(Operation.REPLACE + " v1"),
        "k4", List.of(Operation.REPLACE + " v1"),
        "k5", List.of(Operation.SNAPSHOT + " v0")));
  }
}
