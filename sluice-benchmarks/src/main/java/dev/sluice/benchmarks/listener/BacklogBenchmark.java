package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.InsertManyOptions;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.bson.BsonDocument;
import org.bson.Document;

/**
 * Bounded memory (issue 15 item 6): a backlog of 1,000,000 changes on the embedded MongoDB is
 * processed by a listener in a JVM of its own whose heap is capped at 512 MB ({@code -Xmx512m},
 * serial GC): it must finish without an OutOfMemoryError and with the same result as the writes
 * (the count and the sum of the sequence numbers of every change, each handled once when nothing
 * crashed). The server runs in this JVM. Reported: the time, changes per second, and the child's
 * peak heap use (the largest used size of its heap pools, as the JVM records it).
 *
 * <p>Arguments: changes (default 1,000,000).
 */
public final class BacklogBenchmark {
  private BacklogBenchmark() {}

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      MongoCollection<Document> backlog = client.getDatabase("bench").getCollection("backlog");
      long expectedSum = 0;
      List<Document> batch = new ArrayList<>();
      long writeStart = System.nanoTime();
      for (int i = 0; i < changes; i++) {
        batch.add(new Document("_id", i).append("seq", (long) i).append("payload", "x".repeat(100)));
        expectedSum += i;
        if (batch.size() == 10_000 || i == changes - 1) {
          backlog.insertMany(batch, new InsertManyOptions().ordered(false));
          batch.clear();
        }
      }
      System.out.printf("backlog: %,d inserts written in %.1f s%n", changes, (System.nanoTime() - writeStart) / 1e9);
      try (ChildJvm listener = ChildJvm.start("backlog-listener", List.of("-Xmx512m", "-XX:+UseSerialGC"),
          Node.class, mongo.connectionString(), Integer.toString(changes))) {
        String done = listener.awaitLine(l -> l.startsWith("DONE") || l.contains("OutOfMemoryError"),
            Duration.ofMinutes(30));
        if (!done.startsWith("DONE")) {
          throw new IllegalStateException("the listener failed: " + done);
        }
        String[] f = done.split(" ");
        long count = Long.parseLong(f[1]);
        long sum = Long.parseLong(f[2]);
        double seconds = Double.parseDouble(f[3]);
        long peakMb = Long.parseLong(f[4]);
        if (count != changes || sum != expectedSum) {
          throw new IllegalStateException("handled " + count + " changes with sum " + sum + ", expected " + changes
              + " and " + expectedSum);
        }
        System.out.printf("listener (-Xmx512m, serial GC): %,d changes in %.1f s, %,.0f changes/s, peak heap used %d MB,"
            + " count and sum equal to the writes%n", count, seconds, count / seconds, peakMb);
      }
    }
    System.exit(0);
  }

  /** The listener JVM: handles the backlog, then prints DONE count sum seconds peakHeapMb. */
  public static final class Node {
    public static void main(String[] args) throws Exception {
      String uri = args[0];
      long changes = Long.parseLong(args[1]);
      AtomicLong count = new AtomicLong();
      AtomicLong sum = new AtomicLong();
      AtomicLong first = new AtomicLong();
      CountDownLatch all = new CountDownLatch(1);
      try (MongoClient client = MongoClients.create(uri);
          Listener<BsonDocument> l = Listener.builder(MongoChangeFeed.builder(client, "bench", "backlog").build(),
                  MongoLeaseStore.builder(client.getDatabase("bench")).build())
              .group("backlog").bootstrap(BootstrapPolicy.oldest())
              .checkpoint(CheckpointPolicy.every(1_000, Duration.ofSeconds(1)))
              .handler((change, fence) -> {
                first.compareAndSet(0, System.nanoTime());
                sum.addAndGet(change.document().getInt64("seq").getValue());
                if (count.incrementAndGet() == changes) {
                  all.countDown();
                }
              })
              .build().start()) {
        if (!all.await(30, TimeUnit.MINUTES)) {
          System.out.println("TIMEOUT " + count.get());
          return;
        }
        double seconds = (System.nanoTime() - first.get()) / 1e9;
        long peak = 0;
        for (MemoryPoolMXBean pool : ManagementFactory.getMemoryPoolMXBeans()) {
          if (pool.getType() == MemoryType.HEAP) {
            peak += pool.getPeakUsage().getUsed();
          }
        }
        System.out.println("DONE " + count.get() + " " + sum.get() + " " + seconds + " " + (peak >> 20));
      } catch (OutOfMemoryError e) {
        System.out.println("OutOfMemoryError " + e.getMessage());
      }
    }
  }
}
