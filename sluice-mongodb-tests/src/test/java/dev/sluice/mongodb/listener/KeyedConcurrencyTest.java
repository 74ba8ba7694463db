package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Key-ordered concurrency inside a partition (issue 15 item 2, ADR 0069): with {@code
 * concurrency(k)} changes of different keys overlap in the handler, changes of one key never do
 * and stay in order, a parked key's later changes are parked behind it while other keys flow, and
 * the checkpoint never passes a change still in its handler. Against the embedded server, or a real
 * deployment given {@code -Dsluice.mongodb.uri}.
 */
class KeyedConcurrencyTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String db = "keyed" + DATABASES.incrementAndGet();
  private final MongoDatabase database = MONGO.client().getDatabase(db);
  private final MongoCollection<Document> orders = database.getCollection("orders");
  private final LeaseStore leases = MongoLeaseStore.builder(database).build();
  private final List<Listener<?>> listeners = new ArrayList<>();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
  }

  private MongoChangeFeed feed() {
    return MongoChangeFeed.builder(MONGO.client(), db, "orders").build();
  }

  private Listener<BsonDocument> listener(int concurrency, FailurePolicy failure, Handler<BsonDocument> handler) {
    Listener<BsonDocument> l = Listener.builder(feed(), leases).group("keyed")
        .concurrency(concurrency)
        .pollWait(Duration.ofMillis(50))
        .acquireInterval(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(50, Duration.ofMillis(100)))
        .onFailure(failure)
        .handler(handler)
        .build();
    listeners.add(l);
    return l.start();
  }

  /** {@code keys} documents, then {@code updates} updates of each, round-robin: seq 0 (the insert) to updates. */
  private void write(int keys, int updates) {
    List<Document> docs = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      docs.add(new Document("_id", "k" + k).append("seq", 0));
    }
    orders.insertMany(docs);
    for (int u = 1; u <= updates; u++) {
      for (int k = 0; k < keys; k++) {
        orders.updateOne(Filters.eq("_id", "k" + k), Updates.set("seq", u));
      }
    }
  }

  /** The sequence number a change carries: the insert's document, or what the update set. */
  private static int seq(ChangeEvent<BsonDocument> change) {
    BsonDocument source = change.operation() == Operation.INSERT ? change.document() : change.changedFields();
    return source.getInt32("seq").getValue();
  }

  @Test
  void changesOfOneKeyNeverOverlapAndStayInOrderWhileOtherKeysRunConcurrently() {
    // Fewer keys than lanes: a free lane must not take a later change of a key that is in a handler.
    int keys = 6;
    int updates = 100;
    Map<String, Integer> last = new ConcurrentHashMap<>();
    Map<String, Boolean> inHandler = new ConcurrentHashMap<>();
    List<String> violations = new CopyOnWriteArrayList<>();
    AtomicInteger running = new AtomicInteger();
    AtomicInteger mostAtOnce = new AtomicInteger();
    AtomicInteger handled = new AtomicInteger();
    // Written first, so that each read returns a batch with many changes of every key.
    write(keys, updates);
    listener(8, FailurePolicy.block(RetryPolicy.defaults()), (change, fence) -> {
      String key = change.key();
      if (inHandler.putIfAbsent(key, true) != null) {
        violations.add("two changes of " + key + " at once");
      }
      mostAtOnce.accumulateAndGet(running.incrementAndGet(), Math::max);
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1)); // the handler's work
      int seq = seq(change);
      Integer before = last.put(key, seq);
      if (seq != (before == null ? 0 : before + 1)) {
        violations.add(key + ": seq " + seq + " after " + before);
      }
      running.decrementAndGet();
      inHandler.remove(key);
      handled.incrementAndGet();
    });

    await().atMost(Duration.ofSeconds(60)).until(() -> handled.get() == keys * (updates + 1));
    assertThat(violations).isEmpty();
    assertThat(mostAtOnce.get()).as("changes in the handler at once").isBetween(2, keys);
    assertThat(last.values()).allMatch(seq -> seq == updates);
  }

  @Test
  void aParkedKeysLaterChangesAreParkedBehindItWhileOtherKeysFlow() {
    MongoDeadLetterStore parked = MongoDeadLetterStore.create(database, "dead_letters");
    Map<String, List<Integer>> handled = new ConcurrentHashMap<>();
    AtomicInteger total = new AtomicInteger();
    listener(4, FailurePolicy.park(RetryPolicy.attempts(2, Duration.ofMillis(1), Duration.ofMillis(1)), parked),
        (change, fence) -> {
          total.incrementAndGet();
          if (change.key().equals("k3") && seq(change) == 2) {
            throw new IllegalStateException("poison");
          }
          handled.computeIfAbsent(change.key(), k -> new CopyOnWriteArrayList<>()).add(seq(change));
        });
    write(10, 5);

    // Every key but k3 handled through seq 5; k3 through 1, then seq 2 (poison) and 3-5 parked.
    await().atMost(Duration.ofSeconds(60)).until(() -> parked.count("keyed/" + db + ".orders") == 4
        && handled.values().stream().mapToInt(List::size).sum() == 9 * 6 + 2);
    assertThat(handled.get("k3")).containsExactly(0, 1);
    handled.forEach((key, seqs) -> {
      if (!key.equals("k3")) {
        assertThat(seqs).as(key).containsExactly(0, 1, 2, 3, 4, 5);
      }
    });
  }

  @Test
  void theCheckpointNeverPassesAChangeStillInItsHandler() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger others = new AtomicInteger();
    // Written before the listener starts, so that its first read holds all of them: one batch, in
    // which the slow change comes first and 200 later ones finish while it is in its handler.
    List<Document> docs = new ArrayList<>();
    docs.add(new Document("_id", "slow").append("seq", 0));
    for (int i = 0; i < 200; i++) {
      docs.add(new Document("_id", "after" + i).append("seq", 0));
    }
    orders.insertMany(docs);
    listener(4, FailurePolicy.block(RetryPolicy.defaults()), (change, fence) -> {
      if (change.key().equals("slow")) {
        release.await(); // a handler that takes long
      } else {
        others.incrementAndGet();
      }
    });
    try {
      theCheckpointIsBeforeTheSlowChange(others);
    } finally {
      release.countDown(); // else closing the listener waits for the handler forever
    }
  }

  private void theCheckpointIsBeforeTheSlowChange(AtomicInteger others) {
    await().atMost(Duration.ofSeconds(60)).until(() -> others.get() == 200);
    // Checkpoints come every 50 changes: one that counted the 200 finished ones would be past the
    // slow change by now. The bootstrap point is committed at the start, so there is one.
    Position checkpoint = leases.read("keyed/" + db + ".orders#0of1").orElseThrow().checkpoint();

    // Whoever resumes from that checkpoint handles the slow change.
    try (FeedCursor<BsonDocument> resumed = feed().open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      List<ChangeEvent<BsonDocument>> read = new ArrayList<>();
      await().atMost(Duration.ofSeconds(10)).until(() -> {
        read.addAll(resumed.poll(Duration.ofMillis(100)));
        return !read.isEmpty();
      });
      assertThat(read.get(0).key()).isEqualTo("slow");
    }
  }

  @Test
  void aHandlerThatHandlesOneChangeAtATimeIsRefusedAConcurrencyAboveOne() {
    Handler<BsonDocument> sequential = new Handler<>() {
      @Override
      public void handle(ChangeEvent<BsonDocument> event, dev.sluice.listener.Fence fence) {}

      @Override
      public boolean concurrentCalls() {
        return false;
      }

      @Override
      public String toString() {
        return "a sink";
      }
    };
    assertThatThrownBy(() -> Listener.builder(feed(), leases).group("keyed").concurrency(4).handler(sequential).build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("concurrency")
        .hasMessageContaining("must be 1 for handler a sink");
    assertThatThrownBy(() -> Listener.builder(feed(), leases).concurrency(0))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("concurrency");
  }
}
