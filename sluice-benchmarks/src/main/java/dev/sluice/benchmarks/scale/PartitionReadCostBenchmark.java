package dev.sluice.benchmarks.scale;

import com.mongodb.client.MongoClient;
import dev.sluice.benchmarks.Prewrite;
import dev.sluice.feed.Position;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.bson.BsonDocument;

/**
 * What one more partition costs (issue 15, item 3; ADR 0074): one process (one listener, one
 * MongoClient) with 1, 2, 4 and 8 partitions of one group reads the same pre-written inserts from a
 * fresh embedded MongoDB with a handler that does nothing; the clock stops when checkpoints cover
 * every change. Each count runs twice: with a cursor per partition ({@code sharedReads(false)}:
 * every cursor reads the whole change stream and keeps its share, so the read work grows with the
 * partition count while the useful work does not), and with the default shared reader (one cursor
 * for the process). Each round runs every variant in the same order; the first round is not
 * counted; a figure is the median of the in-round ratios to one partition.
 *
 * <p>Arguments: changes (default 20,000), measured rounds (default 3), the checkpoint's time bound
 * in milliseconds (default 1,000, the listener's: {@link CheckpointPolicy#defaults()}); the smoke
 * run's few hundred changes are less than one checkpoint's count, so each of its variants would
 * otherwise wait that bound for its last checkpoint.
 */
public final class PartitionReadCostBenchmark {
  private static final int[] COUNTS = {1, 2, 4, 8, 1, 2, 4, 8};
  /** Which variants share one cursor: the second half. */
  private static boolean shared(int variant) {
    return variant >= COUNTS.length / 2;
  }

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    CheckpointPolicy checkpoint = args.length > 2
        ? new CheckpointPolicy(CheckpointPolicy.DEFAULT_MAX_CHANGES, Duration.ofMillis(Long.parseLong(args[2])))
        : CheckpointPolicy.defaults();
    List<double[]> measured = new ArrayList<>();
    for (int r = 0; r <= rounds; r++) {
      double[] x = new double[COUNTS.length];
      for (int i = 0; i < COUNTS.length; i++) {
        x[i] = run(COUNTS[i], shared(i), changes, checkpoint);
      }
      StringBuilder line = new StringBuilder(r == 0 ? "warm-up:" : "round " + r + ":");
      for (double d : x) {
        line.append(String.format(" %.0f/s", d));
      }
      System.out.println(line);
      if (r > 0) {
        measured.add(x);
      }
    }
    System.out.printf("%nchanges=%d, %d measured rounds, checkpoint every %d changes or %d ms; median of in-round"
        + " ratios to 1 partition [min-max]%n", changes, rounds, checkpoint.maxChanges(), checkpoint.maxDelay().toMillis());
    for (int i = 0; i < COUNTS.length; i++) {
      int k = i;
      int base = shared(i) ? COUNTS.length / 2 : 0;
      double[] ratios = measured.stream().mapToDouble(x -> x[k] / x[base]).sorted().toArray();
      double[] rates = measured.stream().mapToDouble(x -> x[k]).sorted().toArray();
      System.out.printf("%-6s %d partition(s): %8.0f changes/s  ratio %.3f [%.3f-%.3f]%n",
          shared(i) ? "shared" : "own", COUNTS[i],
          rates[rates.length / 2], ratios[ratios.length / 2], ratios[0], ratios[ratios.length - 1]);
    }
    System.out.println("\nshared reader / cursor per partition, same count, same round:");
    for (int i = 0; i < COUNTS.length / 2; i++) {
      int k = i;
      double[] ratios = measured.stream().mapToDouble(x -> x[k + COUNTS.length / 2] / x[k]).sorted().toArray();
      System.out.printf("%d partition(s): %.2fx [%.2f-%.2f]%n", COUNTS[i], ratios[ratios.length / 2], ratios[0],
          ratios[ratios.length - 1]);
    }
  }

  private static double run(int partitions, boolean shared, int changes, CheckpointPolicy checkpoint)
      throws InterruptedException {
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      Prewrite.inserts(client.getDatabase("bench").getCollection("orders"), changes);
      AtomicLong committed = new AtomicLong();
      CountDownLatch done = new CountDownLatch(1);
      long start = System.nanoTime();
      try (Listener<BsonDocument> l = Listener.builder(
              MongoChangeFeed.builder(client, "bench", "orders").sharedReads(shared).build(),
              MongoLeaseStore.builder(client.getDatabase("bench")).build()).group("cost")
          .partitions(partitions)
          .checkpoint(checkpoint)
          .handler((event, fence) -> { })
          .observer(new ListenerObserver() {
            @Override
            public void committed(String lease, long epoch, Position position, int n) {
              if (committed.addAndGet(n) >= changes) {
                done.countDown();
              }
            }
          })
          .build().start()) {
        if (!done.await(10, TimeUnit.MINUTES)) {
          throw new IllegalStateException("did not finish: " + committed.get() + " of " + changes);
        }
        return changes / ((System.nanoTime() - start) / 1e9);
      }
    }
  }
}
