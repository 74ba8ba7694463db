package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import dev.sluice.benchmarks.Prewrite;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;

/**
 * Changes per second through one listener on the embedded server with a no-op handler: checkpoint
 * after every change versus the default batching (100 changes or 1 s), against the baseline of
 * draining the same change stream with the bare driver. Each variant gets a fresh embedded server
 * with the same pre-written changes, all in one run; the ratios are what to compare.
 */
public final class ThroughputBenchmark {
  private ThroughputBenchmark() {}

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 2;
    double[] drain = new double[rounds];
    double[] perChange = new double[rounds];
    double[] batched = new double[rounds];
    for (int r = 0; r < rounds; r++) {
      drain[r] = Prewrite.drainRate("events", changes);
      perChange[r] = listener(changes, CheckpointPolicy.everyChange());
      batched[r] = listener(changes, CheckpointPolicy.defaults());
      System.out.printf("round %d: drain %.0f/s, per-change checkpoint %.0f/s, batched %.0f/s;"
              + " batched/per-change %.2f, batched/drain %.2f%n",
          r + 1, drain[r], perChange[r], batched[r], batched[r] / perChange[r], batched[r] / drain[r]);
    }
    double[] ratio = new double[rounds];
    double[] ofDrain = new double[rounds];
    for (int r = 0; r < rounds; r++) {
      ratio[r] = batched[r] / perChange[r];
      ofDrain[r] = batched[r] / drain[r];
    }
    System.out.printf("%nmedian over %d rounds of the in-round ratios: batched/per-change %.2f,"
        + " batched/drain %.2f, per-change/drain %.3f%n", rounds, median(ratio), median(ofDrain),
        median(ratio) == 0 ? 0 : median(ofDrain) / median(ratio));
    double d = best(drain);
    double p = best(perChange);
    double b = best(batched);
    System.out.printf("%nchanges=%d, best of %d rounds%n", changes, rounds);
    System.out.printf("drain (bare driver, no processing): %8.0f changes/s  ratio 1.00%n", d);
    System.out.printf("listener, checkpoint every change: %8.0f changes/s  ratio %.2f%n", p, p / d);
    System.out.printf("listener, batched (100 / 1 s):     %8.0f changes/s  ratio %.2f%n", b, b / d);
    System.out.printf("batched / per-change:              ratio %.2f%n", b / p);
  }

  private static double median(double[] xs) {
    double[] c = xs.clone();
    java.util.Arrays.sort(c);
    return c.length % 2 == 1 ? c[c.length / 2] : (c[c.length / 2 - 1] + c[c.length / 2]) / 2;
  }

  private static double best(double[] xs) {
    double m = 0;
    for (double x : xs) {
      m = Math.max(m, x);
    }
    return m;
  }

  private static void prewrite(MongoClient client, int changes) {
    Prewrite.inserts(client.getDatabase("bench").getCollection("events"), changes);
  }

  private static double listener(int changes, CheckpointPolicy policy) throws InterruptedException {
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      prewrite(client, changes);
      CountDownLatch done = new CountDownLatch(changes);
      long start = System.nanoTime();
      try (Listener<BsonDocument> l = Listener.builder(
              MongoChangeFeed.builder(client, "bench", "events").build(),
              MongoLeaseStore.builder(client.getDatabase("bench")).build()).group("throughput")
          .checkpoint(policy)
          .handler((change, fence) -> done.countDown())
          .build().start()) {
        if (!done.await(10, TimeUnit.MINUTES)) {
          throw new IllegalStateException("listener did not finish: " + done.getCount() + " left");
        }
        return changes / ((System.nanoTime() - start) / 1e9);
      }
    }
  }
}
