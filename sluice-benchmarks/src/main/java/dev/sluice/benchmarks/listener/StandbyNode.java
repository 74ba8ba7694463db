package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import org.bson.BsonDocument;

/**
 * A listener with the library's default settings (lease 10 s, renew and acquire every 3.3 s,
 * checkpoint every 100 changes or 1 s) that prints each delivery: one side of the failover
 * benchmark. On SIGTERM it closes the listener (commit, release). Arguments: connection string,
 * database, collection, owner, and optionally a PostgreSQL or MariaDB JDBC URL: the leases are then
 * kept there ({@code SqlLeaseStore}; on PostgreSQL release notices by LISTEN/NOTIFY) instead of in
 * MongoDB. The system
 * property {@code bench.partitions} sets the partition count (default 1), {@code bench.lease.ms}
 * the lease (default 10,000), {@code bench.session.ms} the SQL lease store's session-liveness bound
 * (ADR 0114; default off).
 */
public final class StandbyNode {
  /**
   * The default lease (renew and acquire every third of it), written out: the benchmark reports
   * against it; system property {@code bench.lease.ms} sets another (the smoke run's shorter one).
   */
  static final java.time.Duration LEASE = java.time.Duration.ofMillis(Long.getLong("bench.lease.ms", 10_000));

  private StandbyNode() {}

  public static void main(String[] args) throws Exception {
    MongoClient client = MongoClients.create(args[0]);
    LeaseStore leases;
    if (args.length > 4) {
      // A pool, as a service has (sluice-app's PostgresSource): connections open before they are needed.
      HikariConfig pool = new HikariConfig();
      pool.setJdbcUrl(args[4]);
      if (args[4].startsWith("jdbc:postgresql:")) {
        pool.setUsername(EmbeddedPostgresServer.USER); // MariaDB's URL names its user
      }
      pool.setMaximumPoolSize(6);
      pool.setMinimumIdle(4);
      SqlLeaseStore.Builder sql = SqlLeaseStore.builder(new HikariDataSource(pool)).table("failover_lease");
      Long session = Long.getLong("bench.session.ms");
      leases = (session == null ? sql : sql.sessionLiveness(java.time.Duration.ofMillis(session))).build();
    } else {
      leases = MongoLeaseStore.builder(client.getDatabase(args[1])).build();
    }
    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(client, args[1], args[2]).build(), leases).group("failover")
        .owner(args[3])
        .partitions(Integer.getInteger("bench.partitions", 1))
        .leaseDuration(LEASE)
        .handler((change, fence) -> System.out.println("DELIVERED " + change.document().getInt32("n").getValue()))
        .observer(new ListenerObserver() {
          @Override
          public void acquired(Lease lease) {
            // The grant's stamp on the store's clock: its expiry minus the lease duration.
            System.out.println("ACQUIRED " + args[3] + " grantedAt="
                + lease.expiresAt().minus(LEASE).toEpochMilli() + " lease=" + lease.name());
          }
        })
        .build();
    listener.start();
    // SIGTERM: hand over as a service does (commit, release), so a peer need not wait for expiry.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      listener.close();
      System.out.println("CLOSED " + args[3]);
    }));
    System.out.println("READY " + args[3]);
    Thread.currentThread().join();
  }
}
