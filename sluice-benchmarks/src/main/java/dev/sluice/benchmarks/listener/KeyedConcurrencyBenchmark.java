package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.bson.BsonDocument;
import org.bson.Document;

/**
 * Key-ordered concurrency inside one partition (issue 15 item 2, ADR 0069): a handler that takes
 * 2 ms per change (a call to another service, simulated by parking the thread), one partition,
 * {@code concurrency} 1 against 16 in the same round on the same backlog. The figure is changes
 * per second from the first change handled to the last; every key's changes are checked to arrive
 * in order (a sequence number per key), and no two of one key to overlap.
 *
 * <p>Arguments: keys (default 200), updates per key (default 20), rounds (default 4; the first is a
 * warm-up and not counted).
 */
public final class KeyedConcurrencyBenchmark {
  private static final long WORK_NANOS = TimeUnit.MILLISECONDS.toNanos(2);

  private KeyedConcurrencyBenchmark() {}

  public static void main(String[] args) throws Exception {
    int keys = args.length > 0 ? Integer.parseInt(args[0]) : 200;
    int updates = args.length > 1 ? Integer.parseInt(args[1]) : 20;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 4;
    int[] variants = {1, 16};
    List<Double> ratios = new ArrayList<>();
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      for (int r = 0; r < rounds; r++) {
        double[] perSecond = new double[variants.length];
        for (int v = 0; v < variants.length; v++) {
          String db = "keyed" + r + "x" + variants[v];
          write(client.getDatabase(db).getCollection("orders"), keys, updates);
          perSecond[v] = run(client, db, variants[v], keys * (updates + 1));
        }
        double ratio = perSecond[1] / perSecond[0];
        System.out.printf("round %d%s: %,d changes of %d keys, handler 2 ms: concurrency 1 %,.0f changes/s,"
            + " concurrency 16 %,.0f changes/s, ratio %.2f%n", r, r == 0 ? " (warm-up, not counted)" : "",
            keys * (updates + 1), keys, perSecond[0], perSecond[1], ratio);
        if (r > 0) {
          ratios.add(ratio);
        }
      }
    }
    double[] sorted = ratios.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    System.out.printf("concurrency 16 / concurrency 1, median of %d rounds: %.2f (min %.2f, max %.2f)%n",
        sorted.length, sorted[sorted.length / 2], sorted[0], sorted[sorted.length - 1]);
    System.out.println("per-key order and exclusivity: checked in every round");
    System.exit(0);
  }

  private static void write(MongoCollection<Document> orders, int keys, int updates) {
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

  /** Changes per second from the first change handled to the last, with the order checked. */
  private static double run(MongoClient client, String db, int concurrency, int changes) throws Exception {
    Map<String, Integer> last = new ConcurrentHashMap<>();
    Map<String, Boolean> inHandler = new ConcurrentHashMap<>();
    AtomicInteger handled = new AtomicInteger();
    AtomicLong first = new AtomicLong();
    CountDownLatch all = new CountDownLatch(1);
    List<String> violations = new java.util.concurrent.CopyOnWriteArrayList<>();
    try (Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(client, db, "orders").build(),
            MongoLeaseStore.builder(client.getDatabase(db)).build())
        .group("bench").concurrency(concurrency).bootstrap(BootstrapPolicy.oldest())
        .pollWait(Duration.ofMillis(50)).acquireInterval(Duration.ofMillis(100))
        .checkpoint(CheckpointPolicy.every(500, Duration.ofSeconds(1)))
        .handler((change, fence) -> {
          first.compareAndSet(0, System.nanoTime());
          String key = change.key();
          if (inHandler.putIfAbsent(key, true) != null) {
            violations.add("two changes of " + key + " at once");
          }
          LockSupport.parkNanos(WORK_NANOS);
          int seq = seq(change);
          Integer before = last.put(key, seq);
          if (seq != (before == null ? 0 : before + 1)) {
            violations.add(key + ": seq " + seq + " after " + before);
          }
          inHandler.remove(key);
          if (handled.incrementAndGet() == changes) {
            all.countDown();
          }
        })
        .build().start()) {
      if (!all.await(10, TimeUnit.MINUTES)) {
        throw new IllegalStateException("handled " + handled.get() + " of " + changes);
      }
      long took = System.nanoTime() - first.get();
      if (!violations.isEmpty()) {
        throw new IllegalStateException("per-key order or exclusivity broken: "
            + Arrays.toString(violations.stream().limit(5).toArray()));
      }
      return changes / (took / 1e9);
    }
  }

  private static int seq(ChangeEvent<BsonDocument> change) {
    BsonDocument source = change.operation() == Operation.INSERT ? change.document() : change.changedFields();
    return source.getInt32("seq").getValue();
  }
}
