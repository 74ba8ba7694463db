package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.InsertManyOptions;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.Operation;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.feed.SnapshotRequest;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonArray;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Re-snapshots on request (issue 14 item 2, {@code docs/adr/0067}): a running consumer group is
 * asked to read its collection, or a range of it, again while it streams on. Every key is read
 * again or changed by the stream meanwhile, no key ever goes back to an older version, the request
 * records each partition's completion, a restart goes on from the last committed document, and a
 * request document written by hand works like one written by the API. Against the embedded server,
 * or a real deployment given {@code -Dsluice.mongodb.uri}.
 */
class SnapshotRequestTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String db = "resnapshot" + DATABASES.incrementAndGet();
  private final MongoCollection<Document> orders = database().getCollection("orders");
  private final List<Listener<?>> listeners = new ArrayList<>();
  private final VersionedSink sink = new VersionedSink();
  /** Once set, the keys of every SNAPSHOT change that arrives, and how many arrive. */
  private final AtomicBoolean requested = new AtomicBoolean();
  private final Set<String> reread = ConcurrentHashMap.newKeySet();
  private final AtomicInteger rereads = new AtomicInteger();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
  }

  private MongoDatabase database() {
    return MONGO.client().getDatabase(db);
  }

  private MongoChangeFeed.Builder feed() {
    return MongoChangeFeed.builder(MONGO.client(), db, "orders");
  }

  private Listener<BsonDocument> member(String owner, int partitions, int chunkSize) {
    Listener<BsonDocument> l = Listener.builder(
            feed().snapshotChunkSize(chunkSize).snapshotRequestInterval(Duration.ofMillis(200)).build(),
            MongoLeaseStore.builder(database()).build()).group("resnap")
        .owner(owner)
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(5))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(BootstrapPolicy.snapshot())
        .checkpoint(CheckpointPolicy.every(100, Duration.ofMillis(500)))
        .handler((change, fence) -> {
          if (requested.get() && change.operation() == Operation.SNAPSHOT) {
            reread.add(change.key());
            rereads.incrementAndGet();
          }
          sink.apply(change);
        })
        .build();
    listeners.add(l);
    return l.start();
  }

  private void insert(int from, int to) {
    List<Document> batch = new ArrayList<>();
    for (int i = from; i < to; i++) {
      batch.add(new Document("_id", i).append("version", 1L));
    }
    orders.insertMany(batch, new InsertManyOptions().ordered(false));
  }

  private Map<String, Long> source() {
    Map<String, Long> out = new HashMap<>();
    orders.find().forEach(d -> out.put(MongoChangeFeed.keyOf(new org.bson.BsonDocument("_id",
        d.toBsonDocument().get("_id")).get("_id")), d.getLong("version")));
    return out;
  }

  private SnapshotRequest request(String id) {
    return feed().build().snapshotRequests("resnap").stream().filter(r -> r.id().equals(id)).findFirst().orElseThrow();
  }

  @Test
  void aRequestedReSnapshotReadsEveryKeyAgainWhileChangesFlowAndNoKeyGoesBack() throws Exception {
    int documents = 3_000;
    insert(0, documents);
    member("a", 3, 250);
    member("b", 3, 250); // three partitions over two members
    await().atMost(Duration.ofSeconds(90)).until(() -> sink.state.equals(source()));

    // Updates while the re-snapshot reads: the keys they touch may be left to the stream.
    Set<String> touched = ConcurrentHashMap.newKeySet();
    CountDownLatch writing = new CountDownLatch(1);
    AtomicBoolean stop = new AtomicBoolean();
    Thread writer = new Thread(() -> {
      ThreadLocalRandom random = ThreadLocalRandom.current();
      while (!stop.get()) {
        int id = random.nextInt(documents);
        touched.add(Integer.toString(id));
        orders.updateOne(Filters.eq("_id", id), Updates.inc("version", 1L));
        writing.countDown();
      }
    }, "resnapshot-writer");
    writer.start();
    writing.await();
    requested.set(true);
    SnapshotRequest asked = feed().build().requestSnapshot("resnap", null, null);
    assertThat(asked.stream()).isEqualTo(db + ".orders");
    await().atMost(Duration.ofSeconds(90)).until(() -> request(asked.id()).complete(3));
    stop.set(true);
    writer.join();

    await().atMost(Duration.ofSeconds(60)).until(() -> sink.state.equals(source()));
    assertThat(sink.wentBack).as("keys that went back to an older version").isEmpty();
    Set<String> expected = new HashSet<>(source().keySet());
    expected.removeAll(touched);
    assertThat(expected).as("keys neither read again nor changed while the re-snapshot ran")
        .isNotEmpty().allSatisfy(key -> assertThat(reread).contains(key));
    assertThat(request(asked.id()).done()).containsOnlyKeys("0of3", "1of3", "2of3");
  }

  @Test
  void aHandWrittenRequestForARangeReadsOnlyThatRange() {
    insert(0, 500);
    orders.insertOne(new Document("_id", "a-string-id").append("version", 1L)); // sorts after every number
    member("a", 2, 50);
    await().atMost(Duration.ofSeconds(60)).until(() -> sink.state.equals(source()));

    requested.set(true);
    database().getCollection(MongoChangeFeed.DEFAULT_SNAPSHOT_REQUESTS).insertOne(new Document("_id", "by-hand")
        .append("group", "resnap").append("stream", db + ".orders").append("from", 100).append("to", 199));
    await().atMost(Duration.ofSeconds(60)).until(() -> request("by-hand").complete(2));

    Set<String> range = new HashSet<>();
    for (int i = 100; i <= 199; i++) {
      range.add(Integer.toString(i));
    }
    assertThat(reread).isEqualTo(range);
    assertThat(rereads.get()).as("documents read again").isEqualTo(100);
  }

  @Test
  void aReSnapshotInterruptedByARestartGoesOnFromItsLastCommittedDocument() {
    int documents = 2_000;
    insert(0, documents);
    Listener<BsonDocument> first = member("a", 1, 50);
    await().atMost(Duration.ofSeconds(60)).until(() -> sink.state.equals(source()));

    requested.set(true);
    SnapshotRequest asked = feed().build().requestSnapshot("resnap", null, null);
    await().atMost(Duration.ofSeconds(60)).until(() -> rereads.get() >= 500);
    first.close(); // commits what it handed out
    int beforeRestart = rereads.get();
    assertThat(request(asked.id()).doneBy(new dev.sluice.feed.PartitionSpec(0, 1))).isFalse();
    // The committed checkpoint says how far the request got (what `sluice snapshot --progress` shows).
    dev.sluice.feed.Position checkpoint = MongoLeaseStore.builder(database()).build()
        .read("resnap/" + db + ".orders#0of1").orElseThrow().checkpoint();
    assertThat(request(asked.id()).readingAt(checkpoint)).hasValueSatisfying(at -> assertThat(at).startsWith("after _id "));

    member("b", 1, 50);
    await().atMost(Duration.ofSeconds(60)).until(() -> request(asked.id()).complete(1));
    await().atMost(Duration.ofSeconds(30)).until(() -> reread.size() == documents);
    assertThat(beforeRestart).isLessThan(documents);
    assertThat(rereads.get()).as("documents read again in all, over the restart")
        .isLessThanOrEqualTo(documents + 50);
    assertThat(sink.wentBack).isEmpty();
  }

  @Test
  void requestsAFeedCannotServeAreRefusedNamingTheCause() {
    assertThatThrownBy(() -> feed().fullDocument(FullDocument.DEFAULT).build().requestSnapshot("resnap", null, null))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("fullDocument default");
    assertThatThrownBy(() -> feed().build().requestSnapshot("resnap",
            new BsonArray(List.of(new BsonInt32(1))), new BsonString("z")))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("must be _id values");
    assertThatThrownBy(() -> feed().snapshotRequestInterval(Duration.ofMillis(10)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("snapshotRequestInterval");
    assertThat(feed().build().snapshotRequests("resnap")).isEmpty();
  }
}
