package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bson.Document;

/**
 * Failover time after SIGKILL of the owner and hand-over time after SIGTERM, with the default
 * settings: the time from the signal to the standby JVM holding the partition (and a change
 * written right after the signal is then checked to be delivered). Runs {@code runs} times
 * (default 10) each way, alternated, each on a fresh collection, and prints medians, extremes and
 * their ratio. Arguments: runs, and the lease store: {@code mongodb} (default, the feed's server)
 * or {@code postgresql} (an embedded PostgreSQL started here; the feed stays on MongoDB).
 */
public final class FailoverBenchmark {
  private FailoverBenchmark() {}

  public static void main(String[] args) throws Exception {
    int runs = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    String store = args.length > 1 ? args[1] : "mongodb";
    if (!store.equals("mongodb") && !store.equals("postgresql")) {
      throw new IllegalArgumentException("lease store: mongodb or postgresql, not " + store);
    }
    List<Long> killed = new ArrayList<>();
    List<Long> terminated = new ArrayList<>();
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        EmbeddedPostgresServer postgres = store.equals("postgresql") ? EmbeddedPostgresServer.start() : null) {
      String leases = postgres == null ? null : postgres.jdbcUrl(postgres.createDatabase("failover"));
      System.out.printf("lease store: %s%n", store);
      for (int run = 0; run < runs; run++) {
        // Alternated in one process, so both see the same machine: SIGKILL (the standby waits for
        // the lease to expire) and SIGTERM (the owner commits and releases on its way out).
        killed.add(failover(mongo, client, leases, "kill" + run, true));
        terminated.add(failover(mongo, client, leases, "term" + run, false));
        System.out.printf("run %2d: after SIGKILL %5d ms, after SIGTERM %5d ms%n", run + 1,
            killed.get(run), terminated.get(run));
      }
    }
    long kill = median(killed);
    long term = median(terminated);
    System.out.printf("failover after SIGKILL over %d runs (lease 10 s, renew/acquire 3.33 s): median %d ms, max %d ms, min %d ms%n",
        runs, kill, max(killed), min(killed));
    System.out.printf("hand-over after SIGTERM over %d runs: median %d ms, max %d ms, min %d ms; ratio to SIGKILL %.2f%n",
        runs, term, max(terminated), min(terminated), (double) term / kill);
  }

  /**
   * Milliseconds from the signal to the standby holding the partition; then checks that the
   * change written right after the signal is delivered by one of them.
   */
  private static long failover(EmbeddedMongo mongo, MongoClient client, String leases, String collection, boolean kill) {
    MongoCollection<Document> docs = client.getDatabase("bench").getCollection(collection);
    // The standby starts only once the owner holds the lease, so the roles are certain.
    try (ChildJvm owner = ChildJvm.start("owner", StandbyNode.class, node(mongo, collection, "owner-", leases))) {
      owner.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(60));
      try (ChildJvm standby = ChildJvm.start("standby", StandbyNode.class, node(mongo, collection, "standby-", leases))) {
        standby.awaitLineStartingWith("READY", Duration.ofSeconds(60));
        docs.insertOne(new Document("n", 0));
        owner.awaitLineStartingWith("DELIVERED 0", Duration.ofSeconds(30));
        long signalled = System.nanoTime();
        if (kill) {
          owner.kill();
        } else {
          owner.terminate();
        }
        docs.insertOne(new Document("n", 1));
        standby.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(60));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - signalled);
        // Change 1 is delivered by the standby, or (SIGTERM only) by the owner before it stopped:
        // a process shutting down finishes what it read; the standby resumes after its checkpoint.
        if (kill) {
          standby.awaitLineStartingWith("DELIVERED 1", Duration.ofSeconds(60));
        } else {
          owner.awaitExit(Duration.ofSeconds(60));
          if (!owner.output().contains("DELIVERED 1")) {
            standby.awaitLineStartingWith("DELIVERED 1", Duration.ofSeconds(60));
          }
        }
        return ms;
      }
    }
  }

  /** A {@link StandbyNode}'s arguments. */
  private static String[] node(EmbeddedMongo mongo, String collection, String role, String leases) {
    return leases == null
        ? new String[] {mongo.connectionString(), "bench", collection, role + collection}
        : new String[] {mongo.connectionString(), "bench", collection, role + collection, leases};
  }

  private static long median(List<Long> values) {
    List<Long> sorted = values.stream().sorted().toList();
    return sorted.size() % 2 == 1 ? sorted.get(sorted.size() / 2)
        : (sorted.get(sorted.size() / 2 - 1) + sorted.get(sorted.size() / 2)) / 2;
  }

  private static long max(List<Long> values) {
    return values.stream().mapToLong(Long::longValue).max().orElse(0);
  }

  private static long min(List<Long> values) {
    return values.stream().mapToLong(Long::longValue).min().orElse(0);
  }
}
