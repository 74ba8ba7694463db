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
    List<Long> pastExpiry = new ArrayList<>();
    List<Long> terminated = new ArrayList<>();
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        EmbeddedPostgresServer postgres = store.equals("postgresql") ? EmbeddedPostgresServer.start() : null) {
      String leases = postgres == null ? null : postgres.jdbcUrl(postgres.createDatabase("failover"));
      System.out.printf("lease store: %s%n", store);
      for (int run = 0; run < runs; run++) {
        // Alternated in one process, so both see the same machine: SIGKILL (the standby waits for
        // the lease to expire) and SIGTERM (the owner commits and releases on its way out).
        long[] kill = failover(mongo, client, leases, "kill" + run, true);
        killed.add(kill[0]);
        pastExpiry.add(kill[1]);
        terminated.add(failover(mongo, client, leases, "term" + run, false)[0]);
        System.out.printf("run %2d: after SIGKILL %5d ms (taken %4d ms after the dead holder's lease expired on the"
            + " store's clock), after SIGTERM %5d ms%n", run + 1, killed.get(run), pastExpiry.get(run),
            terminated.get(run));
      }
    }
    long kill = median(killed);
    long term = median(terminated);
    System.out.printf("failover after SIGKILL over %d runs (lease 10 s, renew/acquire 3.33 s): median %d ms, max %d ms, min %d ms%n",
        runs, kill, max(killed), min(killed));
    System.out.printf("taken after the dead holder's expiry (store clock) over %d runs: median %d ms, max %d ms, min %d ms%n",
        runs, median(pastExpiry), max(pastExpiry), min(pastExpiry));
    System.out.printf("hand-over after SIGTERM over %d runs: median %d ms, max %d ms, min %d ms; ratio to SIGKILL %.2f%n",
        runs, term, max(terminated), min(terminated), (double) term / kill);
  }

  /**
   * Milliseconds from the signal to the standby holding the partition, and (SIGKILL) from the dead
   * holder's expiry to the standby's grant, both read on the store's clock (the record after the
   * kill, and the grant's own stamp); then checks that the change written right after the signal
   * is delivered by one of them.
   */
  private static long[] failover(EmbeddedMongo mongo, MongoClient client, String leases, String collection,
      boolean kill) {
    MongoCollection<Document> docs = client.getDatabase("bench").getCollection(collection);
    // The standby starts only once the owner holds the lease, so the roles are certain.
    try (ChildJvm owner = ChildJvm.start("owner", StandbyNode.class, node(mongo, collection, "owner-", leases))) {
      owner.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(60));
      try (ChildJvm standby = ChildJvm.start("standby", StandbyNode.class, node(mongo, collection, "standby-", leases))) {
        standby.awaitLineStartingWith("READY", Duration.ofSeconds(60));
        docs.insertOne(new Document("n", 0));
        owner.awaitLineStartingWith("DELIVERED 0", Duration.ofSeconds(30));
        long signalled = System.nanoTime();
        Long deadExpiry = null;
        if (kill) {
          owner.kill();
          // The dead holder renews no more: its record now holds the expiry the standby waits for.
          try (LeaseReader reader = new LeaseReader(client, leases)) {
            deadExpiry = reader.expiry("failover/bench." + collection + "#0of1");
          }
        } else {
          owner.terminate();
        }
        docs.insertOne(new Document("n", 1));
        String acquired = standby.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(60));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - signalled);
        long past = deadExpiry == null ? 0
            : Long.parseLong(acquired.substring(acquired.indexOf("grantedAt=") + "grantedAt=".length()).strip())
                - deadExpiry;
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
        return new long[] {ms, past};
      }
    }
  }

  /** Reads lease records from the store the nodes use (MongoDB, or the PostgreSQL table). */
  private static final class LeaseReader implements AutoCloseable {
    private final com.zaxxer.hikari.HikariDataSource pool;
    private final dev.sluice.lease.LeaseStore store;

    LeaseReader(MongoClient client, String leases) {
      if (leases == null) {
        pool = null;
        store = dev.sluice.mongodb.lease.MongoLeaseStore.builder(client.getDatabase("bench")).build();
      } else {
        com.zaxxer.hikari.HikariConfig config = new com.zaxxer.hikari.HikariConfig();
        config.setJdbcUrl(leases);
        config.setUsername(EmbeddedPostgresServer.USER);
        config.setMaximumPoolSize(1);
        pool = new com.zaxxer.hikari.HikariDataSource(config);
        store = dev.sluice.jdbc.lease.SqlLeaseStore.builder(pool).table("failover_lease").build();
      }
    }

    long expiry(String name) {
      return store.read(name).orElseThrow(() -> new IllegalStateException("no lease record " + name))
          .expiresAt().toEpochMilli();
    }

    @Override
    public void close() {
      if (pool != null) {
        pool.close();
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
