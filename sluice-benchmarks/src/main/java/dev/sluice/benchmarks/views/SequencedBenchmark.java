package dev.sluice.benchmarks.views;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import dev.sluice.mongodb.sequenced.SequencedSet;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.bson.BsonDocument;
import org.bson.BsonInt32;

/**
 * Sequenced set updates per second with 1 and 8 concurrent consumers taking a shuffled stream
 * with 10 % duplicates, against the baseline of the same number of unconditional {@code $set}
 * upserts (which would give a wrong result out of order). Verifies the guarded result equals
 * sequential application (0 differences).
 *
 * <p>Arguments: operations (default 20000), rounds (default 2).
 */
public final class SequencedBenchmark {
  private SequencedBenchmark() {}

  record Op(int doc, String member, boolean add, long seq) {}

  public static void main(String[] args) throws Exception {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 2;
    List<Op> history = new ArrayList<>();
    Random random = new Random(1);
    for (int i = 0; i < n; i++) {
      history.add(new Op(random.nextInt(100), "m" + random.nextInt(10), random.nextBoolean(), i + 1));
    }
    List<Op> delivery = new ArrayList<>(history);
    for (int i = 0; i < n / 10; i++) {
      delivery.add(history.get(random.nextInt(n)));
    }
    Collections.shuffle(delivery, random);

    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      Map<String, Double> best = new HashMap<>();
      int run = 0;
      for (int r = 0; r < rounds; r++) {
        for (int consumers : new int[] {1, 8}) {
          MongoCollection<BsonDocument> plain =
              client.getDatabase("bench").getCollection("plain" + run, BsonDocument.class);
          double base =
              run(delivery, consumers, op ->
                  plain.updateOne(
                      Filters.eq("_id", op.doc()),
                      Updates.set("m." + op.member(), op.add()),
                      new UpdateOptions().upsert(true)));
          MongoCollection<BsonDocument> coll =
              client.getDatabase("bench").getCollection("seq" + run++, BsonDocument.class);
          SequencedSet set = SequencedSet.of(coll, "members");
          double guarded =
              run(delivery, consumers, op -> {
                if (op.add()) {
                  set.add(new BsonInt32(op.doc()), op.member(), op.seq());
                } else {
                  set.remove(new BsonInt32(op.doc()), op.member(), op.seq());
                }
              });
          int differences = differences(history, set);
          System.out.printf(
              "round %d, %d consumer(s): unconditional $set %.0f ops/s, sequenced %.0f ops/s,"
                  + " ratio %.2f, differences from sequential application: %d%n",
              r + 1, consumers, base, guarded, guarded / base, differences);
          if (differences != 0) {
            throw new IllegalStateException(differences + " differences");
          }
          best.merge("base" + consumers, base, Math::max);
          best.merge("seq" + consumers, guarded, Math::max);
        }
      }
      System.out.printf("%noperations=%d (+10%% duplicates), best of %d rounds%n", n, rounds);
      for (int c : new int[] {1, 8}) {
        System.out.printf(
            "%d consumer(s): sequenced %8.0f ops/s, unconditional %8.0f ops/s, ratio %.2f%n",
            c, best.get("seq" + c), best.get("base" + c), best.get("seq" + c) / best.get("base" + c));
      }
      System.out.printf(
          "sequenced, 8 vs 1 consumers: ratio %.2f (2 cores, server in the same JVM)%n",
          best.get("seq8") / best.get("seq1"));
    }
  }

  private interface Apply {
    void accept(Op op);
  }

  private static double run(List<Op> delivery, int consumers, Apply apply) throws Exception {
    ConcurrentLinkedQueue<Op> queue = new ConcurrentLinkedQueue<>(delivery);
    ExecutorService pool = Executors.newFixedThreadPool(consumers);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<?>> futures = new ArrayList<>();
    for (int i = 0; i < consumers; i++) {
      futures.add(pool.submit(() -> {
        go.await();
        for (Op op = queue.poll(); op != null; op = queue.poll()) {
          apply.accept(op);
        }
        return null;
      }));
    }
    long t0 = System.nanoTime();
    go.countDown();
    for (Future<?> f : futures) {
      f.get();
    }
    long nanos = System.nanoTime() - t0;
    pool.shutdown();
    return delivery.size() / (nanos / 1e9);
  }

  private static int differences(List<Op> history, SequencedSet set) {
    Map<Integer, Set<String>> expected = new HashMap<>();
    for (Op op : history) {
      Set<String> members = expected.computeIfAbsent(op.doc(), k -> new TreeSet<>());
      if (op.add()) {
        members.add(op.member());
      } else {
        members.remove(op.member());
      }
    }
    int diff = 0;
    for (var e : expected.entrySet()) {
      if (!set.members(new BsonInt32(e.getKey())).equals(e.getValue())) {
        diff++;
      }
    }
    return diff;
  }
}
