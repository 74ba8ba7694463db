package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
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
 * their ratio. Arguments: runs, the lease store: {@code mongodb} (default, the feed's server)
 * or {@code postgresql} (an embedded PostgreSQL started here; the feed stays on MongoDB), and a
 * partition count for a third variant in every round (default 4; 0 leaves it out): SIGKILL of an
 * owner holding all of them while the standby, which counts it as a member, holds none, so that
 * half of the standby's partitions wait for room under its quota when the owner dies (issue 36
 * target 4, ADR 0119); it reports how long after its expiry the last of them was granted. A
 * fourth argument sets the lease in milliseconds (default 10,000, the library's; renew and acquire
 * every third of it): the smoke test's shorter lease waits less for each SIGKILL. The lease store
 * {@code mariadb} keeps the leases in an embedded MariaDB instead; {@code postgresql-session} and
 * {@code mariadb-session} are those with the store's session liveness (ADR 0114, issue 36 target 3),
 * whose bound a fifth argument sets (default 500 ms): a SIGKILLed holder's partitions are then taken
 * before its lease expires, so "taken after the dead holder's expiry" is negative.
 */
public final class FailoverBenchmark {
  private FailoverBenchmark() {}

  public static void main(String[] args) throws Exception {
    int runs = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    String store = args.length > 1 ? args[1] : "mongodb";
    if (!List.of("mongodb", "postgresql", "postgresql-session", "mariadb", "mariadb-session").contains(store)) {
      throw new IllegalArgumentException(
          "lease store: mongodb, postgresql, postgresql-session, mariadb or mariadb-session, not " + store);
    }
    List<Long> killed = new ArrayList<>();
    List<Long> pastExpiry = new ArrayList<>();
    List<Long> terminated = new ArrayList<>();
    int spread = args.length > 2 ? Integer.parseInt(args[2]) : 4;
    List<Long> spreadKilled = new ArrayList<>();
    List<Long> spreadPast = new ArrayList<>();
    long leaseMs = args.length > 3 ? Long.parseLong(args[3]) : 10_000;
    long sessionMs = store.endsWith("-session") ? (args.length > 4 ? Long.parseLong(args[4]) : 500) : 0;
    List<String> options = new ArrayList<>(List.of("-Dbench.lease.ms=" + leaseMs));
    if (sessionMs > 0) {
      options.add("-Dbench.session.ms=" + sessionMs);
    }
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        EmbeddedPostgresServer postgres = store.startsWith("postgresql") ? EmbeddedPostgresServer.start() : null;
        EmbeddedMariaDb mariadb = store.startsWith("mariadb") ? EmbeddedMariaDb.start() : null) {
      String leases = postgres != null ? postgres.jdbcUrl(postgres.createDatabase("failover"))
          : mariadb != null ? mariadb.jdbcUrl(mariadb.createDatabase("failover")) : null;
      System.out.printf("lease store: %s%s%n", store, sessionMs > 0 ? " (session bound " + sessionMs + " ms)" : "");
      for (int run = 0; run < runs; run++) {
        // Alternated in one process, so both see the same machine: SIGKILL (the standby waits for
        // the lease to expire) and SIGTERM (the owner commits and releases on its way out).
        long[] kill = failover(mongo, client, leases, "kill" + run, true, 1, options);
        killed.add(kill[0]);
        pastExpiry.add(kill[1]);
        terminated.add(failover(mongo, client, leases, "term" + run, false, 1, options)[0]);
        System.out.printf("run %2d: after SIGKILL %5d ms (taken %4d ms after the dead holder's lease expired on the"
            + " store's clock), after SIGTERM %5d ms%n", run + 1, killed.get(run), pastExpiry.get(run),
            terminated.get(run));
        if (spread > 1) {
          long[] all = failover(mongo, client, leases, "spread" + run, true, spread, options);
          spreadKilled.add(all[0]);
          spreadPast.add(all[1]);
          System.out.printf("run %2d: %d partitions, after SIGKILL %5d ms to the last (taken %4d ms after its"
              + " lease expired on the store's clock; each: %s)%n", run + 1, spread, all[0], all[1],
              java.util.Arrays.toString(java.util.Arrays.copyOfRange(all, 2, all.length)));
        }
      }
    }
    long kill = median(killed);
    long term = median(terminated);
    System.out.printf("failover after SIGKILL over %d runs (lease %s s, renew/acquire %.2f s): median %d ms, max %d ms, min %d ms%n",
        runs, java.math.BigDecimal.valueOf(leaseMs, 3).stripTrailingZeros().toPlainString(), leaseMs / 3000.0, kill,
        max(killed), min(killed));
    System.out.printf("taken after the dead holder's expiry (store clock) over %d runs: median %d ms, max %d ms, min %d ms%n",
        runs, median(pastExpiry), max(pastExpiry), min(pastExpiry));
    if (spread > 1) {
      System.out.printf("%d partitions, the last taken after its dead holder's expiry (store clock) over %d runs:"
          + " median %d ms, max %d ms, min %d ms (after SIGKILL: median %d ms)%n", spread, runs, median(spreadPast),
          max(spreadPast), min(spreadPast), median(spreadKilled));
    }
    System.out.printf("hand-over after SIGTERM over %d runs: median %d ms, max %d ms, min %d ms; ratio to SIGKILL %.2f%n",
        runs, term, max(terminated), min(terminated), (double) term / kill);
  }

  /**
   * Milliseconds from the signal to the standby holding every partition, and (SIGKILL) from the
   * dead holder's expiry to the standby's grant, the latest over the partitions, then each
   * partition's; both read on the store's clock (the records after the kill, and the grants' own
   * stamps). Then checks that the change written right after the signal is delivered by one of them.
   */
  private static long[] failover(EmbeddedMongo mongo, MongoClient client, String leases, String collection,
      boolean kill, int partitions, List<String> options) {
    MongoCollection<Document> docs = client.getDatabase("bench").getCollection(collection);
    List<String> jvm = new ArrayList<>(options);
    jvm.add("-Dbench.partitions=" + partitions);
    List<String> names = new ArrayList<>();
    for (int i = 0; i < partitions; i++) {
      names.add("failover/bench." + collection + "#" + i + "of" + partitions);
    }
    // The standby starts only once the owner holds the leases, so the roles are certain.
    try (ChildJvm owner = ChildJvm.start("owner", jvm, StandbyNode.class, node(mongo, collection, "owner-", leases))) {
      for (String name : names) {
        owner.awaitLine(l -> l.startsWith("ACQUIRED") && l.endsWith(" lease=" + name), Duration.ofSeconds(60));
      }
      try (ChildJvm standby = ChildJvm.start("standby", jvm, StandbyNode.class, node(mongo, collection, "standby-", leases))) {
        standby.awaitLineStartingWith("READY", Duration.ofSeconds(60));
        docs.insertOne(new Document("n", 0));
        owner.awaitLineStartingWith("DELIVERED 0", Duration.ofSeconds(30));
        if (standby.output().stream().anyMatch(l -> l.startsWith("ACQUIRED"))) {
          // The owner handed partitions back to balance (it counted the standby): not a failover.
          throw new IllegalStateException("the standby held a partition before the signal: " + standby.output());
        }
        long signalled = System.nanoTime();
        long[] deadExpiry = null;
        if (kill) {
          owner.kill();
          // The dead holder renews no more: its records now hold the expiries the standby waits for.
          deadExpiry = new long[partitions];
          try (LeaseReader reader = new LeaseReader(client, leases)) {
            for (int i = 0; i < partitions; i++) {
              deadExpiry[i] = reader.expiry(names.get(i));
            }
          }
        } else {
          owner.terminate();
        }
        docs.insertOne(new Document("n", 1));
        long[] out = new long[2 + partitions];
        for (int i = 0; i < partitions; i++) {
          String name = names.get(i);
          String acquired = standby.awaitLine(l -> l.startsWith("ACQUIRED") && l.endsWith(" lease=" + name),
              Duration.ofSeconds(60));
          if (deadExpiry != null) {
            int from = acquired.indexOf("grantedAt=") + "grantedAt=".length();
            out[2 + i] = Long.parseLong(acquired.substring(from, acquired.indexOf(' ', from))) - deadExpiry[i];
          }
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - signalled);
        long past = java.util.Arrays.stream(out, 2, out.length).max().orElse(0);
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
        out[0] = ms;
        out[1] = past;
        return out;
      }
    }
  }

  /** Reads lease records from the store the nodes use (MongoDB, or the SQL table). */
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
        if (leases.startsWith("jdbc:postgresql:")) {
          config.setUsername(EmbeddedPostgresServer.USER); // MariaDB's URL names its user
        }
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
