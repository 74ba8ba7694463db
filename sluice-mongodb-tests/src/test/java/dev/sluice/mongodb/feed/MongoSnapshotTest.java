package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonBinary;
import org.bson.BsonBoolean;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonDouble;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonObjectId;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.bson.Document;
import org.bson.types.ObjectId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The snapshot bootstrap of the MongoDB feed ({@code docs/adr/0066}) beyond the feed contract:
 * every type of {@code _id}, partitions, and documents written while the snapshot reads them.
 * Against the embedded server, or a real deployment given {@code -Dsluice.mongodb.uri}.
 */
class MongoSnapshotTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();

  private final MongoDatabase db = MONGO.client().getDatabase("snapshots");
  private final String name = "s" + COLLECTIONS.incrementAndGet();
  private final MongoCollection<BsonDocument> collection = db.getCollection(name, BsonDocument.class);
  private final List<FeedCursor<BsonDocument>> cursors = new ArrayList<>();

  @org.junit.jupiter.api.AfterEach
  void close() {
    cursors.forEach(FeedCursor::close);
  }

  private FeedCursor<BsonDocument> open(MongoChangeFeed feed, PartitionSpec partition) {
    FeedCursor<BsonDocument> c = feed.open(partition, StartPoint.snapshot());
    cursors.add(c);
    return c;
  }

  private MongoChangeFeed feed(int chunk) {
    return MongoChangeFeed.builder(MONGO.client(), "snapshots", name).snapshotChunkSize(chunk).build();
  }

  /** Documents with {@code _id} 0 .. count-1, each at version 1. */
  private void insertVersioned(int count) {
    List<BsonDocument> docs = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      docs.add(new BsonDocument("_id", new BsonInt32(i)).append("version", new BsonInt64(1)));
    }
    collection.insertMany(docs);
  }

  /** Polls until {@code count} changes arrived, then checks that no more come. */
  private static List<ChangeEvent<BsonDocument>> readAll(FeedCursor<BsonDocument> c, int count) {
    List<ChangeEvent<BsonDocument>> out = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (out.size() < count && System.nanoTime() < deadline) {
      out.addAll(c.poll(Duration.ofMillis(100)));
    }
    assertThat(out).hasSize(count);
    assertThat(c.poll(Duration.ofMillis(200))).as("nothing after the snapshot").isEmpty();
    return out;
  }

  @Test
  void idsOfEveryTypeAreReadOnceInTheServersOrder() {
    List<BsonValue> ids = List.of(new BsonInt32(3), new BsonInt64(2), new BsonDouble(2.5), new BsonInt32(-7),
        new BsonString("b"), new BsonString("a"), new BsonString("é"), new BsonObjectId(new ObjectId()),
        new BsonObjectId(new ObjectId()), new BsonBoolean(false), new BsonBoolean(true),
        new BsonDateTime(1_000), new BsonDateTime(-5), new BsonBinary(new byte[] {1, 2}),
        new BsonDocument("region", new BsonString("eu")).append("n", new BsonInt32(1)));
    for (BsonValue id : ids) {
      collection.insertOne(new BsonDocument("_id", id).append("v", new BsonInt32(1)));
    }
    // Chunks of 2: every chunk boundary crosses a type bracket somewhere.
    List<ChangeEvent<BsonDocument>> events = readAll(open(feed(2), PartitionSpec.single()), ids.size());

    assertThat(events).extracting(ChangeEvent::operation).containsOnly(Operation.SNAPSHOT);
    assertThat(events).extracting(e -> e.documentKey().get("_id")).containsExactlyInAnyOrderElementsOf(ids);
    List<BsonValue> served = new ArrayList<>();
    collection.find().sort(new BsonDocument("_id", new BsonInt32(1))).forEach(d -> served.add(d.get("_id")));
    assertThat(events).extracting(e -> e.documentKey().get("_id")).containsExactlyElementsOf(served);
  }

  @Test
  void partitionsEachSnapshotTheirOwnKeys() {
    List<BsonDocument> docs = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      docs.add(new BsonDocument("_id", new BsonString("k" + i)).append("v", new BsonInt32(1)));
    }
    collection.insertMany(docs);
    MongoChangeFeed feed = feed(40);
    Set<String> seen = new HashSet<>();
    int total = 0;
    for (int p = 0; p < 3; p++) {
      PartitionSpec partition = new PartitionSpec(p, 3);
      int expected = (int) docs.stream().filter(d -> partition.owns(MongoEvents.keyOf(d.get("_id")))).count();
      List<ChangeEvent<BsonDocument>> events = readAll(open(feed, partition), expected);
      events.forEach(e -> assertThat(partition.owns(e.key())).as("%s is %s's", e.key(), partition).isTrue());
      events.forEach(e -> seen.add(e.key()));
      total += events.size();
    }
    assertThat(total).isEqualTo(300);
    assertThat(seen).hasSize(300);
  }

  @Test
  void documentsWrittenWhileTheSnapshotReadsThemEndAsTheSourceAndNeverGoBack() throws Exception {
    int documents = 5_000;
    insertVersioned(documents);
    FeedCursor<BsonDocument> cursor = open(feed(100), PartitionSpec.single());

    // Updates (each a higher version), inserts and deletes, while the snapshot is read.
    AtomicBoolean stop = new AtomicBoolean();
    CountDownLatch writing = new CountDownLatch(50);
    Thread writer = new Thread(() -> {
      ThreadLocalRandom random = ThreadLocalRandom.current();
      int next = documents;
      for (int w = 0; w < 3_000 && !stop.get(); w++) {
        int pick = random.nextInt(10);
        if (pick < 7) {
          collection.updateOne(Filters.eq("_id", random.nextInt(next)), Updates.inc("version", 1L));
        } else if (pick < 9) {
          collection.insertOne(new BsonDocument("_id", new BsonInt32(next++)).append("version", new BsonInt64(1)));
        } else {
          collection.deleteOne(Filters.eq("_id", random.nextInt(next)));
        }
        writing.countDown();
      }
    }, "snapshot-writer");
    writer.start();
    writing.await();

    Map<String, Long> state = new HashMap<>();
    Map<String, Long> highest = new HashMap<>();
    int snapshotReads = 0;
    int changes = 0;
    int changesDuringTheSnapshot = 0;
    long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
    while (System.nanoTime() < deadline) {
      for (ChangeEvent<BsonDocument> e : cursor.poll(Duration.ofMillis(100))) {
        if (e.operation() == Operation.SNAPSHOT) {
          snapshotReads++;
        } else {
          changes++;
        }
        if (e.position().token().startsWith("{\"snapshot\"") && e.operation() != Operation.SNAPSHOT) {
          changesDuringTheSnapshot++;
        }
        apply(e, state, highest);
      }
      if (!writer.isAlive() && state.equals(source())) {
        break;
      }
    }
    stop.set(true);
    writer.join();
    assertThat(snapshotReads).as("documents read by the snapshot").isGreaterThan(documents / 2);
    assertThat(changes).as("changes streamed").isPositive();
    // The engine commits a change's own position: while the snapshot is read, it keeps its progress.
    assertThat(changesDuringTheSnapshot).as("changes streamed while it was read, at snapshot positions").isPositive();
    assertThat(state).as("what the changes, applied in order, give").isEqualTo(source());
  }

  @Test
  void aSnapshotResumedAfterAChangeStreamedWhileItWasReadGoesOnWithTheSnapshot() throws Exception {
    int documents = 3_000;
    insertVersioned(documents);
    MongoChangeFeed feed = feed(100);
    FeedCursor<BsonDocument> first = open(feed, PartitionSpec.single());
    Map<String, Long> state = new HashMap<>();
    ChangeEvent<BsonDocument> streamedDuringSnapshot = null;
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    int round = 0;
    while (streamedDuringSnapshot == null && System.nanoTime() < deadline) {
      // A write to a document the snapshot has not read yet, then a chunk or two.
      collection.updateOne(Filters.eq("_id", documents - 1 - round++), Updates.inc("version", 1L));
      for (ChangeEvent<BsonDocument> e : first.poll(Duration.ofMillis(100))) {
        fold(e, state);
        if (e.operation() != Operation.SNAPSHOT && streamedDuringSnapshot == null) {
          streamedDuringSnapshot = e;
        }
      }
    }
    assertThat(streamedDuringSnapshot).as("a change streamed while the snapshot was read").isNotNull();
    assertThat(state.size()).as("documents read before the restart").isLessThan(documents);
    first.close();

    // What the engine does after a crash: open after the last position it committed.
    FeedCursor<BsonDocument> second = feed.open(PartitionSpec.single(), StartPoint.after(streamedDuringSnapshot.position()));
    cursors.add(second);
    Map<String, Long> expected = source();
    deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!state.equals(expected) && System.nanoTime() < deadline) {
      second.poll(Duration.ofMillis(100)).forEach(e -> fold(e, state));
    }
    assertThat(state).as("every document, after the restart too").isEqualTo(expected);
  }

  private static void fold(ChangeEvent<BsonDocument> e, Map<String, Long> state) {
    if (e.operation() == Operation.DELETE) {
      state.remove(e.key());
    } else if (e.document() != null) {
      state.put(e.key(), e.document().getInt64("version").getValue());
    }
  }

  /** Applies one change to {@code state}, checking that no key goes back to an older version. */
  /** What each key received, for the message of a failure. */
  private static final Map<String, List<String>> HISTORY = new java.util.concurrent.ConcurrentHashMap<>();

  private static void apply(ChangeEvent<BsonDocument> e, Map<String, Long> state, Map<String, Long> highest) {
    HISTORY.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e.operation() + " " + e.document());
    if (e.operation() == Operation.DELETE) {
      state.remove(e.key());
      return;
    }
    if (e.document() == null && e.documentState() == DocumentState.CURRENT) {
      return; // looked up after a later delete, which follows
    }
    assertThat(e.document()).as("%s carries its document", e).isNotNull();
    long version = e.document().getInt64("version").getValue();
    Long before = highest.put(e.key(), version);
    // An update's looked-up document (updateLookup, CURRENT) is the one read with the change, so
    // two updates read after both happened show the same version; every other state is new.
    boolean allowed = before == null || before < version
        || (e.documentState() == DocumentState.CURRENT && before == version);
    assertThat(allowed).as("%s: version %d after %s (an older or repeated state): %s", e.key(), version, before,
        HISTORY.get(e.key())).isTrue();
    state.put(e.key(), version);
  }

  private Map<String, Long> source() {
    Map<String, Long> out = new HashMap<>();
    collection.find().forEach(d -> out.put(MongoEvents.keyOf(d.get("_id")), d.getInt64("version").getValue()));
    return out;
  }

  @Test
  void aCollectionDroppedInTheMiddleOfItsSnapshotEndsThePartitionSayingSo() {
    insertVersioned(300);
    FeedCursor<BsonDocument> cursor = open(feed(100), PartitionSpec.single());
    assertThat(cursor.poll(Duration.ofMillis(100))).hasSize(100);
    collection.drop();
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    List<ChangeEvent<BsonDocument>> after = new ArrayList<>();
    while (!cursor.ended() && System.nanoTime() < deadline) {
      after.addAll(cursor.poll(Duration.ofMillis(100)));
    }
    assertThat(cursor.ended()).as("ended after the drop").isTrue();
    assertThat(cursor.endReason()).contains("dropped");
    assertThat(after).extracting(ChangeEvent::operation).containsExactly(Operation.OTHER);
  }

  @Test
  void aSnapshotNeedsUpdatesThatCarryTheirDocument() {
    MongoChangeFeed feed = MongoChangeFeed.builder(MONGO.client(), "snapshots", name)
        .fullDocument(FullDocument.DEFAULT).build();
    assertThat(feed.supports(StartPoint.snapshot())).isFalse();
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.snapshot()))
        .isInstanceOf(FeedException.class)
        .hasMessageContaining("fullDocument default")
        .hasMessageContaining("updateLookup");
  }

  @Test
  void anEmptyCollectionStreamsAtOnce() {
    FeedCursor<BsonDocument> cursor = open(feed(10), PartitionSpec.single());
    assertThat(cursor.poll(Duration.ofMillis(100))).isEmpty();
    collection.insertOne(new BsonDocument("_id", new BsonString("first")).append("at", new BsonDateTime(new Date().getTime())));
    List<ChangeEvent<BsonDocument>> events = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (events.isEmpty() && System.nanoTime() < deadline) {
      events.addAll(cursor.poll(Duration.ofMillis(100)));
    }
    assertThat(events).extracting(ChangeEvent::operation).containsExactly(Operation.INSERT);
    assertThat(cursor.position().token()).doesNotContain("snapshot");
  }
}
