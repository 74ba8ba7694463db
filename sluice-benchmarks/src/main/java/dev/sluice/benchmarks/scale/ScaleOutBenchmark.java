package dev.sluice.benchmarks.scale;

import com.mongodb.client.MongoClient;
import dev.sluice.benchmarks.Prewrite;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
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
 * Scale-out on a handler-bound load (issue 15, item 3: "4 processes at least 3.5x one process"):
 * one group of 16 partitions on MongoDB, a handler that waits 2 ms per change (a call to another
 * service), each process capped at 4 threads ({@code Listener.Builder.threads}, ADR 0075: a
 * process's handler capacity, as a machine's would be). One process holds all 16 partitions; then
 * 4 processes (4 listeners with a MongoClient each, in this JVM) hold 4 each. Each run starts its
 * processes on an empty collection, waits until the partitions are spread evenly and streaming,
 * holds the handlers at a gate while the backlog is written, then opens the gate and times until
 * every change is handled. Both variants run in every round, in the same order; the first round is
 * not counted; the figure is the median of the in-round ratios.
 *
 * <p>Arguments: changes (default 8,000), measured rounds (default 3).
 */
public final class ScaleOutBenchmark {
  private static final int PARTITIONS = 16;
  private static final int THREADS_PER_PROCESS = 4;
  private static final long HANDLER_MILLIS = 2;

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 8_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    List<Double> ratios = new ArrayList<>();
    for (int r = 0; r <= rounds; r++) {
      double one = run(1, changes);
      double four = run(4, changes);
      System.out.printf("%s 1 process %.0f changes/s, 4 processes %.0f changes/s: %.2fx%n",
          r == 0 ? "warm-up:" : "round " + r + ":", one, four, four / one);
      if (r > 0) {
        ratios.add(four / one);
      }
    }
    ratios.sort(null);
    System.out.printf("%nchanges=%d, %d partitions, %d threads per process, handler %d ms; 4 processes / 1:"
        + " median %.2fx [%.2f-%.2f]%n", changes, PARTITIONS, THREADS_PER_PROCESS, HANDLER_MILLIS,
        ratios.get(ratios.size() / 2), ratios.get(0), ratios.get(ratios.size() - 1));
  }

  private static double run(int processes, int changes) throws Exception {
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient writer = mongo.client()) {
      writer.getDatabase("bench").createCollection("orders");
      CountDownLatch gate = new CountDownLatch(1);
      AtomicLong handled = new AtomicLong();
      CountDownLatch done = new CountDownLatch(1);
      List<MongoClient> clients = new ArrayList<>();
      List<Listener<BsonDocument>> listeners = new ArrayList<>();
      try {
        for (int p = 0; p < processes; p++) {
          MongoClient client = mongo.client();
          clients.add(client);
          listeners.add(Listener.builder(MongoChangeFeed.builder(client, "bench", "orders").build(),
                  MongoLeaseStore.builder(client.getDatabase("bench")).build())
              .group("scale").partitions(PARTITIONS).threads(THREADS_PER_PROCESS)
              .leaseDuration(Duration.ofSeconds(3))
              .bootstrap(BootstrapPolicy.latest())
              .handler((event, fence) -> {
                gate.await();
                Thread.sleep(HANDLER_MILLIS);
                if (handled.incrementAndGet() == changes) {
                  done.countDown();
                }
              })
              .build().start());
        }
        awaitSpread(listeners);
        Prewrite.inserts(writer.getDatabase("bench").getCollection("orders"), changes);
        long start = System.nanoTime();
        gate.countDown();
        if (!done.await(10, TimeUnit.MINUTES)) {
          throw new IllegalStateException("did not finish: " + handled.get() + " of " + changes);
        }
        return changes / ((System.nanoTime() - start) / 1e9);
      } finally {
        gate.countDown();
        listeners.forEach(Listener::close);
        clients.forEach(MongoClient::close);
      }
    }
  }

  /** Until every listener streams on its even share of the partitions. */
  private static void awaitSpread(List<Listener<BsonDocument>> listeners) throws InterruptedException {
    int share = PARTITIONS / listeners.size();
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(2);
    while (!listeners.stream().allMatch(l -> l.status().stream()
        .filter(s -> s.state() == PartitionState.ACTIVE).count() == share)) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("partitions not spread evenly within 2 minutes");
      }
      Thread.sleep(50); // a benchmark's set-up poll, outside the timed part
    }
  }
}
