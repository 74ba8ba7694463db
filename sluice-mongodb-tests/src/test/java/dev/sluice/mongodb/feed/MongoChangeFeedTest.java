package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.mongodb.internal.MongoServerTime;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.types.ObjectId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The change feed against the embedded server, or a real deployment given
 * {@code -Dsluice.mongodb.uri}. Where a position is checked after reading, the check is that
 * resuming there delivers exactly the changes written afterwards: a real server may move an idle
 * position on with its post-batch resume token, the embedded one does not.
 */
class MongoChangeFeedTest {

  /** Unique per run: the suite also runs against a real deployment (-Dsluice.mongodb.uri). */
  private static final String DB = "feedtest" + java.util.UUID.randomUUID().toString().substring(0, 8);
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();

  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private static String freshCollection() {
    return "c" + COLLECTIONS.incrementAndGet();
  }

  private static MongoCollection<BsonDocument> collection(String name) {
    return MONGO.client().getDatabase(DB).getCollection(name, BsonDocument.class);
  }

  private static MongoChangeFeed feed(String collection) {
    return MongoChangeFeed.builder(MONGO.client(), DB, collection).batchSize(50).build();
  }

  private static void insert(String collection, String... ids) {
    for (String id : ids) {
      collection(collection).insertOne(new BsonDocument("_id", new BsonString(id)));
    }
  }

  /** Polls until at least {@code count} changes arrived; returns every change that arrived. */
  private static List<ChangeEvent<BsonDocument>> read(FeedCursor<BsonDocument> cursor, int count) {
    List<ChangeEvent<BsonDocument>> seen = new ArrayList<>();
    await()
        .atMost(Duration.ofSeconds(10))
        .pollDelay(Duration.ZERO)
        .until(
            () -> {
              seen.addAll(cursor.poll(Duration.ofMillis(50)));
              return seen.size() >= count;
            });
    return seen;
  }

  private static List<String> keys(List<ChangeEvent<BsonDocument>> events) {
    return events.stream().map(ChangeEvent::key).collect(Collectors.toList());
  }

  /**
   * Resuming at {@code p} delivers, of this collection's changes, exactly those written from now
   * on: {@code p} is at or after every change read before, and before any later one.
   */
  private static void assertResumesBeforeOnlyNewChanges(String collection, Position p) {
    String probe = "probe-" + java.util.UUID.randomUUID().toString().substring(0, 8);
    try (FeedCursor<BsonDocument> cursor = feed(collection).open(PartitionSpec.single(), StartPoint.after(p))) {
      insert(collection, probe);
      List<String> seen = new ArrayList<>();
      await().atMost(Duration.ofSeconds(10)).pollDelay(Duration.ZERO).until(() -> {
        seen.addAll(keys(cursor.poll(Duration.ofMillis(50))));
        return seen.contains(probe);
      });
      // Only probes written after p (earlier checks of the same test write them too).
      assertThat(seen).allMatch(k -> k.startsWith("probe-")).endsWith(probe);
    }
  }

  private static Instant serverNow() {
    return MongoServerTime.now(MONGO.client().getDatabase(DB));
  }

  @Test
  void oldestBootstrapSeesWritesMadeBeforeTheCursorOpened() {
    // Seed 000 figure 4a: the first writes happen before any listener ever started.
    String c = freshCollection();
    insert(c, "a", "b", "c");
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.oldest())) {
      insert(c, "d");
      List<ChangeEvent<BsonDocument>> events = read(cursor, 4);
      assertThat(keys(events)).containsExactly("a", "b", "c", "d");
      assertThat(events).allMatch(e -> e.operation() == Operation.INSERT);
      assertThat(events.get(0).document()).isEqualTo(new BsonDocument("_id", new BsonString("a")));
      assertThat(events.get(0).stream()).isEqualTo(DB + "." + c);
      assertResumesBeforeOnlyNewChanges(c, cursor.position());
    }
  }

  @Test
  void aPinnedBootstrapPointSurvivesACrashBeforeTheFirstChange() {
    // Seed 000 figure 4b: the listener starts, a write happens, the listener crashes before
    // processing it. The engine commits position() right after open; resuming there must see it.
    String c = freshCollection();
    Position pinned;
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.latest())) {
      pinned = cursor.position();
      insert(c, "written-while-starting");
      // crash: the change is never polled
    }
    try (FeedCursor<BsonDocument> cursor =
        feed(c).open(PartitionSpec.single(), StartPoint.after(pinned))) {
      assertThat(keys(read(cursor, 1))).containsExactly("written-while-starting");
    }
  }

  @Test
  void resumesStrictlyAfterACheckpointedResumeToken() {
    String c = freshCollection();
    insert(c, "1", "2", "3", "4", "5");
    Position checkpoint;
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.oldest())) {
      List<ChangeEvent<BsonDocument>> events = read(cursor, 5);
      checkpoint = events.get(2).position();
      assertThat(checkpoint.time()).isNotNull();
      assertThat(events.get(2).time()).isEqualTo(checkpoint.time());
    }
    insert(c, "6");
    try (FeedCursor<BsonDocument> cursor =
        feed(c).open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      List<ChangeEvent<BsonDocument>> events = read(cursor, 3);
      assertThat(keys(events)).containsExactly("4", "5", "6");
      assertThat(cursor.poll(Duration.ofMillis(50))).isEmpty();
    }
  }

  @Test
  void eventIdsAreStableAcrossReReads() {
    String c = freshCollection();
    insert(c, "x", "y");
    List<String> first;
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.oldest())) {
      first = read(cursor, 2).stream().map(ChangeEvent::id).toList();
    }
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.oldest())) {
      assertThat(read(cursor, 2).stream().map(ChangeEvent::id).toList()).isEqualTo(first);
    }
    assertThat(new HashSet<>(first)).hasSize(2);
  }

  @Test
  void latestSkipsEarlierChangesAndAtTimeStartsAtTheGivenTime() {
    String c = freshCollection();
    insert(c, "before");
    long beforeSecond = serverNow().getEpochSecond();
    // Operation times have second granularity: let the server's clock pass that second so
    // "latest" and "at" have a well-defined boundary.
    await().atMost(Duration.ofSeconds(3)).until(() -> serverNow().getEpochSecond() > beforeSecond);
    Instant boundary = serverNow();
    MongoChangeFeed feed = feed(c);
    try (FeedCursor<BsonDocument> latest = feed.open(PartitionSpec.single(), StartPoint.latest());
        FeedCursor<BsonDocument> at = feed.open(PartitionSpec.single(), StartPoint.at(boundary))) {
      insert(c, "after");
      assertThat(keys(read(latest, 1))).containsExactly("after");
      assertThat(keys(read(at, 1))).containsExactly("after");
    }
    try (FeedCursor<BsonDocument> early =
        feed.open(PartitionSpec.single(), StartPoint.at(boundary.minusSeconds(60)))) {
      assertThat(keys(read(early, 2))).containsExactly("before", "after");
    }
  }

  @Test
  void updatesReplacesAndDeletesAreKeyedByTheDocumentId() {
    String c = freshCollection();
    ObjectId oid = new ObjectId();
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.latest())) {
      collection(c).insertOne(new BsonDocument("_id", new BsonString("k")).append("v", new BsonInt32(1)));
      List<ChangeEvent<BsonDocument>> inserted = read(cursor, 1);
      collection(c).updateOne(Filters.eq("_id", "k"), Updates.set("v", 2));
      List<ChangeEvent<BsonDocument>> updated = read(cursor, 1);
      collection(c).deleteOne(Filters.eq("_id", "k"));
      collection(c).insertOne(new BsonDocument("_id", new org.bson.BsonObjectId(oid)));
      collection(c).insertOne(new BsonDocument("_id", new BsonInt32(42)));
      List<ChangeEvent<BsonDocument>> rest = read(cursor, 3);

      assertThat(inserted.get(0).operation()).isEqualTo(Operation.INSERT);
      ChangeEvent<BsonDocument> update = updated.get(0);
      assertThat(update.operation()).isEqualTo(Operation.UPDATE);
      assertThat(update.key()).isEqualTo("k");
      assertThat(update.documentKey()).isEqualTo(new BsonDocument("_id", new BsonString("k")));
      assertThat(update.document().getInt32("v").getValue()).isEqualTo(2);
      assertThat(rest.get(0).operation()).isEqualTo(Operation.DELETE);
      assertThat(rest.get(0).key()).isEqualTo("k");
      assertThat(rest.get(0).document()).isNull();
      assertThat(rest.get(1).key()).isEqualTo(oid.toHexString());
      assertThat(rest.get(2).key()).isEqualTo("42");
    }
  }

  @Test
  void anUpdateReadAfterItsDocumentWasDeletedKeepsItsKeyAndWhatItSetWithANullLookup() {
    // As a real server sends it: documentKey {_id}, updateDescription, fullDocument null once
    // the document is gone. (An event without any _id is covered with a fake cursor in
    // MongoChangeFeedFaultTest: it is handed on as undecodable, never dropped.)
    String c = freshCollection();
    try (FeedCursor<BsonDocument> cursor = feed(c).open(PartitionSpec.single(), StartPoint.latest())) {
      collection(c).insertOne(new BsonDocument("_id", new BsonString("gone")));
      collection(c).updateOne(Filters.eq("_id", "gone"), Updates.set("v", 1));
      collection(c).deleteOne(Filters.eq("_id", "gone"));
      insert(c, "next");
      List<ChangeEvent<BsonDocument>> events = read(cursor, 4);
      assertThat(events).extracting(ChangeEvent::operation)
          .containsExactly(Operation.INSERT, Operation.UPDATE, Operation.DELETE, Operation.INSERT);
      ChangeEvent<BsonDocument> update = events.get(1);
      assertThat(update.key()).isEqualTo("gone");
      assertThat(update.document()).isNull();
      assertThat(update.documentState()).isEqualTo(dev.sluice.feed.DocumentState.CURRENT);
      assertThat(update.changedFields()).isEqualTo(new BsonDocument("v", new org.bson.BsonInt32(1)));
      assertThat(events.get(0).documentState()).isEqualTo(dev.sluice.feed.DocumentState.AFTER_CHANGE);
      assertThat(events.get(2).documentState()).isEqualTo(dev.sluice.feed.DocumentState.NONE);
      assertThat(events.get(3).key()).isEqualTo("next");
      assertResumesBeforeOnlyNewChanges(c, cursor.position());
    }
  }

  @Test
  void postImagesAreRefusedNamingTheCollectionAndTheFixUntilTheCollectionKeepsThemThenEachUpdateCarriesItsOwn() {
    String c = freshCollection();
    insert(c, "k");
    MongoChangeFeed images = MongoChangeFeed.builder(MONGO.client(), DB, c)
        .fullDocument(com.mongodb.client.model.changestream.FullDocument.WHEN_AVAILABLE).build();
    assertThatThrownBy(() -> images.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOf(dev.sluice.ConfigurationException.class)
        .hasMessageContaining(DB + "." + c)
        .hasMessageContaining("collMod: \"" + c + "\", changeStreamPreAndPostImages: {enabled: true}")
        .hasMessageContaining("updateLookup");

    MONGO.client().getDatabase(DB).runCommand(new BsonDocument("collMod", new BsonString(c))
        .append("changeStreamPreAndPostImages", new BsonDocument("enabled", org.bson.BsonBoolean.TRUE)));
    try (FeedCursor<BsonDocument> cursor = images.open(PartitionSpec.single(), StartPoint.latest())) {
      collection(c).updateOne(Filters.eq("_id", "k"), Updates.set("v", 1));
      collection(c).updateOne(Filters.eq("_id", "k"), Updates.set("v", 2));
      collection(c).deleteOne(Filters.eq("_id", "k"));
      List<ChangeEvent<BsonDocument>> events = read(cursor, 3);
      assertThat(events.get(0).document()).as("the first update's own post-image, not a later state")
          .isEqualTo(new BsonDocument("_id", new BsonString("k")).append("v", new org.bson.BsonInt32(1)));
      assertThat(events.get(0).documentState()).isEqualTo(dev.sluice.feed.DocumentState.AFTER_CHANGE);
      assertThat(events.get(1).document().getInt32("v").getValue()).isEqualTo(2);
    }
  }

  @Test
  void extraPipelineStagesFilterOnTheServer() {
    String c = freshCollection();
    MongoChangeFeed onlyInserts =
        MongoChangeFeed.builder(MONGO.client(), DB, c)
            .pipeline(List.of(com.mongodb.client.model.Aggregates.match(
                Filters.eq("operationType", "insert"))))
            .build();
    try (FeedCursor<BsonDocument> cursor =
        onlyInserts.open(PartitionSpec.single(), StartPoint.latest())) {
      insert(c, "a");
      collection(c).updateOne(Filters.eq("_id", "a"), Updates.set("v", 1));
      collection(c).deleteOne(Filters.eq("_id", "a"));
      insert(c, "b");
      List<ChangeEvent<BsonDocument>> events = read(cursor, 2);
      assertThat(events).extracting(ChangeEvent::operation)
          .containsExactly(Operation.INSERT, Operation.INSERT);
      assertThat(keys(events)).containsExactly("a", "b");
    }
  }

  @Test
  void partitionsSplitTheKeysDisjointlyAndCompletelyAndAllAdvance() {
    String c = freshCollection();
    int partitions = 3;
    List<String> ids = IntStream.range(0, 60).mapToObj(i -> "doc-" + i).toList();
    insert(c, ids.toArray(String[]::new));
    MongoChangeFeed feed = feed(c);
    List<Set<String>> seen = new ArrayList<>();
    List<Position> finalPositions = new ArrayList<>();
    Position last;
    try (FeedCursor<BsonDocument> all = feed.open(PartitionSpec.single(), StartPoint.oldest())) {
      List<ChangeEvent<BsonDocument>> events = read(all, ids.size());
      last = events.get(events.size() - 1).position();
    }
    for (int p = 0; p < partitions; p++) {
      PartitionSpec spec = new PartitionSpec(p, partitions);
      long owned = ids.stream().filter(spec::owns).count();
      try (FeedCursor<BsonDocument> cursor = feed.open(spec, StartPoint.oldest())) {
        Set<String> keys = new HashSet<>();
        await()
            .atMost(Duration.ofSeconds(10))
            .until(
                () -> {
                  cursor.poll(Duration.ofMillis(50)).forEach(e -> keys.add(e.key()));
                  return keys.size() >= owned;
                });
        // The other partitions' changes after this one's last move its position too: to the last
        // change (embedded server) or beyond it (a real server's post-batch resume token).
        await().atMost(Duration.ofSeconds(10)).until(() -> {
          cursor.poll(Duration.ofMillis(50)).forEach(e -> keys.add(e.key()));
          return cursor.position().equals(last) || nothingOfTheTestAfter(feed, cursor.position());
        });
        assertThat(keys).allMatch(spec::owns);
        seen.add(keys);
        finalPositions.add(cursor.position());
      }
    }
    Set<String> union = new HashSet<>();
    int total = 0;
    for (Set<String> s : seen) {
      assertThat(s).as("every partition gets some of 60 keys").isNotEmpty();
      union.addAll(s);
      total += s.size();
    }
    assertThat(total).as("disjoint").isEqualTo(ids.size());
    assertThat(union).as("complete").containsExactlyInAnyOrderElementsOf(ids);
    for (Position p : finalPositions) {
      assertResumesBeforeOnlyNewChanges(c, p); // skipped changes advance every partition
    }
  }

  /** Whether resuming the whole feed at {@code p} delivers none of the test's {@code doc-} changes. */
  private static boolean nothingOfTheTestAfter(MongoChangeFeed feed, Position p) {
    try (FeedCursor<BsonDocument> rest = feed.open(PartitionSpec.single(), StartPoint.after(p))) {
      return rest.poll(Duration.ofMillis(200)).stream().noneMatch(e -> e.key().startsWith("doc-"));
    }
  }

  @Test
  void aCheckpointThatFellOffTheOplogIsHistoryLostNotASilentGap() {
    // Its own server: trimming the oplog affects every stream on it.
    try (EmbeddedMongo trimmed = EmbeddedMongo.start();
        MongoClient c = trimmed.client()) {
      MongoCollection<BsonDocument> col = c.getDatabase(DB).getCollection("t", BsonDocument.class);
      for (int i = 1; i <= 5; i++) {
        col.insertOne(new BsonDocument("_id", new BsonString("d" + i)));
      }
      MongoChangeFeed feed = MongoChangeFeed.builder(c, DB, "t").build();
      List<ChangeEvent<BsonDocument>> events;
      try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.oldest())) {
        events = read(cursor, 5);
      }
      Position checkpointOfD1 = events.get(0).position();
      Position checkpointOfD3 = events.get(2).position();
      // The oplog rolls over: entries of d1..d3 are gone, d4 is the oldest retained change.
      org.bson.BsonTimestamp d4 = ((BsonDocument) events.get(3).raw()).getTimestamp("clusterTime");
      assertThat(trimmed.trimOplogBefore(d4)).isEqualTo(3);

      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.after(checkpointOfD1)))
          .isInstanceOfSatisfying(
              dev.sluice.feed.HistoryLostException.class,
              e -> {
                assertThat(e.lostFrom()).isEqualTo(checkpointOfD1);
                assertThat(e.reason()).contains("286");
                assertThat(e.oldestAvailable()).isEqualTo(Instant.ofEpochSecond(d4.getTime()));
              });
      // A real server resumes only where the resume point's own entry is still in the oplog (it
      // reads from there and checks that it is), so a checkpoint at the last trimmed change is
      // history lost too; at the oldest retained change it resumes.
      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.after(checkpointOfD3)))
          .isInstanceOf(dev.sluice.feed.HistoryLostException.class);
      try (FeedCursor<BsonDocument> cursor =
          feed.open(PartitionSpec.single(), StartPoint.after(events.get(3).position()))) {
        assertThat(keys(read(cursor, 1))).containsExactly("d5");
      }
    }
  }

  @Test
  void anIdlePollReturnsNothingAndTheStreamNameDefaultsToTheNamespace() {
    String c = freshCollection();
    MongoChangeFeed feed = feed(c);
    assertThat(feed.stream()).isEqualTo(DB + "." + c);
    try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      assertThat(cursor.poll(Duration.ofMillis(100))).isEmpty();
      assertThat(cursor.ended()).isFalse();
      // Idle, the position may move on (a real server's post-batch token), never past a change.
      assertResumesBeforeOnlyNewChanges(c, cursor.position());
    }
  }

  @Test
  void aCheckpointFromAnotherFeedIsRejectedClearly() {
    MongoChangeFeed feed = feed(freshCollection());
    assertThatThrownBy(
            () -> feed.open(PartitionSpec.single(), StartPoint.after(Position.of("0/16B3748"))))
        .isInstanceOf(FeedException.class)
        .hasMessageContaining("0/16B3748")
        .hasMessageContaining("not a MongoDB change stream position")
        .satisfies(e -> assertThat(((FeedException) e).retryable()).isFalse());
  }

  @Test
  void builderRejectsBadValuesNamingTheParameter() {
    assertThatThrownBy(() -> MongoChangeFeed.builder(MONGO.client(), DB, "c").batchSize(0))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("batchSize");
    assertThatThrownBy(() -> MongoChangeFeed.builder(MONGO.client(), DB, " "))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("collection");
    assertThatThrownBy(
            () ->
                MongoChangeFeed.builder(MONGO.client(), DB, "c")
                    .pollBackoff(Duration.ofMillis(50), Duration.ofMillis(10)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("pollBackoff.max");
    assertThatThrownBy(() -> MongoChangeFeed.builder(MONGO.client(), DB, "c").streamName("a#b"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("streamName");
  }
}
