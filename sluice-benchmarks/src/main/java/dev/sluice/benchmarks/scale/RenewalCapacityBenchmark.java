package dev.sluice.benchmarks.scale;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.net.FaultProxy;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonDocument;

/**
 * How many leases one process keeps against a lease store a given round trip away: one listener
 * holding every partition of its group (the library's defaults: a 10 s lease, renewed every third
 * of it, on its renewal threads, one per 128 partitions and at most 8), its lease store's client
 * behind a {@link FaultProxy} that delays each direction by half the round trip, its change feed
 * straight to the server. Each round waits until every partition is held (at most two minutes),
 * then counts the lease losses of the next {@code seconds} (each partition's
 * {@link PartitionStatus#recentLosses()}). A round trip of 0 is the baseline: no loss expected.
 *
 * <p>Each lease costs one round trip per renewal, so a process renews at most threads / round trip
 * leases a second; when that is less than its leases need, renewals queue behind each other and
 * leases run out while they wait.
 *
 * <p>Arguments: partitions (1000), seconds observed per round trip (40), round trips in ms,
 * comma-separated (0,20,40,60,80), and the lease store client's connection pool (the driver's
 * default, 100): renewals, acquisitions and commits all take a connection from it.
 */
public final class RenewalCapacityBenchmark {

  public static void main(String[] args) throws Exception {
    int partitions = args.length > 0 ? Integer.parseInt(args[0]) : 1000;
    int seconds = args.length > 1 ? Integer.parseInt(args[1]) : 40;
    String[] trips = (args.length > 2 ? args[2] : "0,20,40,60,80").split(",");
    int pool = args.length > 3 ? Integer.parseInt(args[3]) : 100;
    List<String> lines = new ArrayList<>();
    for (String trip : trips) {
      lines.add(run(partitions, seconds, Long.parseLong(trip.trim()), pool));
      System.out.println(lines.get(lines.size() - 1));
    }
    System.out.printf("%npartitions=%d, observed %d s each, lease 10 s, lease store pool %d:%n", partitions, seconds,
        pool);
    lines.forEach(System.out::println);
  }

  private static String run(int partitions, int seconds, long roundTripMillis, int pool) throws Exception {
    try (EmbeddedMongo mongo = EmbeddedMongo.start();
        MongoClient feedClient = mongo.client()) {
      URI server = URI.create(mongo.connectionString().replace("mongodb://", "tcp://"));
      try (FaultProxy proxy = FaultProxy.to("leases", server.getHost(), server.getPort());
          MongoClient leaseClient = MongoClients.create(mongo.clientSettings()
              .applyConnectionString(new com.mongodb.ConnectionString(
                  "mongodb://" + proxy.address() + "/?directConnection=true"))
              .applyToConnectionPoolSettings(p -> p.maxSize(pool))
              .build())) {
        feedClient.getDatabase("bench").createCollection("orders");
        Duration half = Duration.ofNanos(Duration.ofMillis(roundTripMillis).toNanos() / 2);
        proxy.latency(half, Duration.ZERO, Duration.ofHours(1));
        long start = System.nanoTime();
        try (Listener<BsonDocument> listener = Listener.builder(
                MongoChangeFeed.builder(feedClient, "bench", "orders").build(),
                MongoLeaseStore.builder(leaseClient.getDatabase("bench")).build())
            .group("capacity").partitions(partitions)
            .bootstrap(BootstrapPolicy.latest())
            .handler((event, fence) -> { })
            .build().start()) {
          long limit = start + Duration.ofMinutes(2).toNanos();
          while (!allActive(listener) && System.nanoTime() < limit) {
            Thread.sleep(200);
          }
          long held = System.nanoTime();
          boolean all = allActive(listener);
          int lostBefore = losses(listener);
          Thread.sleep(seconds * 1000L);
          int lost = losses(listener) - lostBefore;
          long active = listener.status().stream().filter(s -> s.state() == PartitionState.ACTIVE).count();
          return String.format("round trip %3d ms: %s after %,d ms; in the next %d s %d leases lost, %d of %d"
                  + " held at the end", roundTripMillis, all ? "all held" : "NOT all held",
              (held - start) / 1_000_000, seconds, lost, active, partitions);
        }
      }
    }
  }

  private static boolean allActive(Listener<BsonDocument> listener) {
    return listener.status().stream().allMatch(s -> s.state() == PartitionState.ACTIVE);
  }

  private static int losses(Listener<BsonDocument> listener) {
    return listener.status().stream().mapToInt(PartitionStatus::recentLosses).sum();
  }
}
