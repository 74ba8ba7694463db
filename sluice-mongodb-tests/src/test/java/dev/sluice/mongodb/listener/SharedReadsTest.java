package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Partitions of one listener in one process read the change stream through one cursor (ADR 0074):
 * counted at the driver (the {@code aggregate} commands that open a change stream), with every
 * change delivered, each key's changes in order, on one process and on two sharing the partitions.
 * Runs against a real cluster with {@code -Dsluice.mongodb.uri}.
 */
class SharedReadsTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private static final int KEYS = 40;
  private static final int ROUNDS = 25;

  private final StreamCounter streams = new StreamCounter("orders");
  private final List<AutoCloseable> closing = new ArrayList<>();

  @AfterEach
  void close() throws Exception {
    for (int i = closing.size() - 1; i >= 0; i--) {
      closing.get(i).close();
    }
  }

  private MongoClient countingClient() {
    MongoClient client = streams.client(MONGO.connectionString());
    closing.add(client);
    return client;
  }

  private Listener<BsonDocument> listener(MongoClient client, String db, String owner, int partitions,
      boolean shared, Map<String, List<Integer>> seen) {
    Listener<BsonDocument> l = Listener.builder(
            MongoChangeFeed.builder(client, db, "orders").sharedReads(shared).build(),
            MongoLeaseStore.builder(client.getDatabase(db)).build())
        .group("g")
        .owner(owner)
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(3))
        .handler((change, fence) -> seen.computeIfAbsent(change.key(), k -> new CopyOnWriteArrayList<>())
            .add(StreamCounter.written(change)))
        .build();
    closing.add(l);
    return l;
  }

  private static void write(MongoCollection<Document> orders) {
    for (int round = 0; round < ROUNDS; round++) {
      for (int k = 0; k < KEYS; k++) {
        if (round == 0) {
          orders.insertOne(new Document("_id", "o" + k).append("n", round));
        } else {
          orders.updateOne(new Document("_id", "o" + k), new Document("$set", new Document("n", round)));
        }
      }
    }
  }

  private static void assertEveryChangeInKeyOrder(Map<String, List<Integer>> seen) {
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.size() == KEYS
        && seen.values().stream().allMatch(v -> v.size() >= ROUNDS && v.get(v.size() - 1) == ROUNDS - 1));
    seen.forEach((key, values) -> {
      // At least once, in order: a redelivery repeats a suffix, never goes back further.
      List<Integer> distinct = values.stream().distinct().toList();
      assertThat(distinct).as(key + " " + values).hasSize(ROUNDS).isSorted();
    });
  }

  /** Eight partitions in one process, all held, then the writes: how many streams they opened. */
  private int eightPartitionsInOneProcess(boolean shared) {
    MongoClient client = countingClient();
    String db = MONGO.freshDatabase().getName();
    Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
    Listener<BsonDocument> l = listener(client, db, "p1", 8, shared, seen).start();
    await().atMost(Duration.ofSeconds(30))
        .until(() -> l.status().stream().filter(s -> s.epoch() > 0).count() == 8);
    write(client.getDatabase(db).getCollection("orders"));
    assertEveryChangeInKeyOrder(seen);
    return streams.opened();
  }

  @Test
  void eightPartitionsInOneProcessOpenOneChangeStream() {
    assertThat(eightPartitionsInOneProcess(true)).as("change streams opened for 8 partitions").isEqualTo(1);
  }

  @Test
  void withSharedReadsOffEachPartitionOpensItsOwn() {
    assertThat(eightPartitionsInOneProcess(false)).isEqualTo(8);
  }

  @Test
  void twoProcessesOnUnevenSharesEachReadTheStreamOnce() {
    MongoClient client = countingClient();
    String db = MONGO.freshDatabase().getName();
    Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
    Listener<BsonDocument> a = listener(client, db, "p1", 5, true, seen).start();
    Listener<BsonDocument> b = listener(client, db, "p2", 5, true, seen).start();
    await().atMost(Duration.ofSeconds(60)).until(() ->
        a.status().stream().filter(s -> s.epoch() > 0).count() + b.status().stream().filter(s -> s.epoch() > 0).count() == 5
            && a.status().stream().anyMatch(s -> s.epoch() > 0) && b.status().stream().anyMatch(s -> s.epoch() > 0));
    write(client.getDatabase(db).getCollection("orders"));
    assertEveryChangeInKeyOrder(seen);
    // One stream per process, plus at most one more each time a partition moved between them
    // while they settled on 3 and 2 (it then opens at its checkpoint).
    assertThat(streams.opened()).isLessThanOrEqualTo(2 + 5);
  }

  @Test
  void aPartitionBlockedOnAPoisonChangeDoesNotHoldUpTheOthersInItsProcess() {
    MongoClient client = countingClient();
    String db = MONGO.freshDatabase().getName();
    Map<String, List<Integer>> seen = new ConcurrentHashMap<>();
    // Small batches, so the blocked partition's queue fills and would hold the shared cursor back.
    Listener<BsonDocument> l = Listener.builder(
            MongoChangeFeed.builder(client, db, "orders").batchSize(10).build(),
            MongoLeaseStore.builder(client.getDatabase(db)).build())
        .group("g").owner("p1").partitions(4).leaseDuration(Duration.ofSeconds(3))
        .onFailure(FailurePolicy.block(RetryPolicy.attempts(3, Duration.ofMillis(50), Duration.ofMillis(200))))
        .handler((change, fence) -> {
          if (change.key().equals("o0")) { // a string _id is its own key
            throw new IllegalStateException("poison: " + change.key());
          }
          seen.computeIfAbsent(change.key(), k -> new CopyOnWriteArrayList<>()).add(StreamCounter.written(change));
        })
        .build();
    closing.add(l);
    l.start();
    await().atMost(Duration.ofSeconds(30))
        .until(() -> l.status().stream().filter(s -> s.epoch() > 0).count() == 4);
    int blocked = PartitionSpec.indexOf("o0", 4);
    long others = java.util.stream.IntStream.range(0, KEYS)
        .filter(k -> PartitionSpec.indexOf("o" + k, 4) != blocked).count();
    write(client.getDatabase(db).getCollection("orders"));
    // Every key of the other three partitions gets all its changes, in order, while the blocked
    // one retries its first change (the shared cursor moves it to a cursor of its own).
    await().atMost(Duration.ofSeconds(60)).until(() -> {
      long complete = seen.entrySet().stream().filter(e -> e.getValue().size() >= ROUNDS
          && e.getValue().get(e.getValue().size() - 1) == ROUNDS - 1).count();
      return complete == others;
    });
    seen.forEach((key, values) -> assertThat(values.stream().distinct().toList()).as(key).hasSize(ROUNDS).isSorted());
    assertThat(l.status().get(blocked).state()).isEqualTo(PartitionState.BLOCKED);
  }
}
