package dev.sluice.postgres.listener;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.Lease;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import javax.sql.DataSource;

/**
 * A listener on the PostgreSQL feed in its own JVM, for crash tests: records every delivery in the
 * {@code deliveries} table and prints a line per acquisition and per 100 deliveries.
 *
 * <p>Arguments: JDBC URL, node name, checkpoint every N changes, and optionally the bootstrap
 * ({@code oldest}, the default, or {@code snapshot}). System properties: {@code node.lease.ms}
 * (default 2,000; renewals every 0.3 of it) and {@code node.session.ms}, the lease store's session
 * liveness bound (ADR 0114; default off).
 */
public final class PgRecordingNode {
  private PgRecordingNode() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String name = args[1];
    int every = Integer.parseInt(args[2]);
    BootstrapPolicy bootstrap = args.length > 3 && args[3].equals("snapshot")
        ? BootstrapPolicy.snapshot() : BootstrapPolicy.oldest();
    DataSource ds = ListenerOnPostgresTest.simple(url);
    int[] count = new int[1];
    Connection[] recording = new Connection[1];
    Duration lease = Duration.ofMillis(Long.getLong("node.lease.ms", 2_000));
    SqlLeaseStore.Builder leases = SqlLeaseStore.builder(ds);
    Long session = Long.getLong("node.session.ms");
    if (session != null) {
      leases.sessionLiveness(Duration.ofMillis(session));
    }
    Listener<Map<String, Object>> listener = Listener.builder(
            PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build(),
            leases.build())
        .group("recorder")
        .owner(name)
        .leaseDuration(lease)
        .renewInterval(lease.multipliedBy(3).dividedBy(10))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(bootstrap)
        .checkpoint(CheckpointPolicy.every(every, Duration.ofHours(1)))
        .handler((change, fence) -> {
          // One connection for the recording, not one per change: each new PostgreSQL connection
          // starts a server process, and a few thousand of them were most of a snapshot test's
          // time. Autocommit: a row is committed before the handler returns, as before.
          synchronized (recording) {
            try {
              if (recording[0] == null) {
                recording[0] = ds.getConnection();
              }
              try (PreparedStatement s = recording[0].prepareStatement("INSERT INTO deliveries VALUES (?, ?)")) {
                s.setInt(1, (Integer) change.document().get("n"));
                s.setString(2, name);
                s.executeUpdate();
              }
            } catch (SQLException e) {
              try (Connection broken = recording[0]) { // the next attempt opens a new one
                recording[0] = null;
              } catch (SQLException closing) {
                e.addSuppressed(closing);
              }
              throw e;
            }
          }
          if (++count[0] % 100 == 0) {
            System.out.println("DELIVERED " + count[0]);
          }
        })
        .observer(new ListenerObserver() {
          @Override
          public void acquired(Lease l) {
            System.out.println("ACQUIRED " + name + " epoch=" + l.epoch());
          }
        })
        .build();
    listener.start();
    System.out.println("READY " + name);
    Thread.currentThread().join();
  }
}
