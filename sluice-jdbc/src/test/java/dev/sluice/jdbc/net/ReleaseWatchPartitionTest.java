package dev.sluice.jdbc.net;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The SQL lease store's release watch on PostgreSQL (ADR 0061) whose connection is blackholed by a
 * {@link FaultProxy} (open, nothing comes back): closing the watch ends its thread within seconds
 * and gives its connection back to the pool. Before, the thread's {@code UNLISTEN} on the dead
 * connection waited for an answer without bound, holding the thread and a pool connection.
 */
class ReleaseWatchPartitionTest {
  @RegisterExtension
  final FaultProxies proxies = new FaultProxies();

  private static final String DATABASE = "netlease";

  @Test
  void closingAWatchWhoseConnectionIsBlackholedEndsItsThreadAndFreesItsConnection() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    pg.dataSource(DATABASE); // creates the database
    FaultProxy proxy = proxies.to("release-watch", "127.0.0.1", pg.port());
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl("jdbc:postgresql://" + proxy.address() + "/" + DATABASE + "?user=" + EmbeddedPostgresServer.USER);
    config.setPoolName("cut-off-release-watch");
    config.setMaximumPoolSize(2);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(500);
    try (HikariDataSource pool = new HikariDataSource(config)) {
      SqlLeaseStore store = SqlLeaseStore.builder(pool).table("lease_watch_net").build();
      String prefix = "watch-" + UUID.randomUUID().toString().substring(0, 8);
      AutoCloseable watch = store.watchReleases(prefix, name -> { });
      // The watch listens before it returns: its connection is out of the pool, through the proxy.
      assertThat(pool.getHikariPoolMXBean().getActiveConnections()).as("the watch's connection").isEqualTo(1);
      assertThat(proxy.connectionsAccepted()).as("the watch goes through the proxy").isPositive();
      Thread thread = watchThread(prefix).orElseThrow();

      proxy.blackhole(Duration.ofSeconds(60));
      watch.close();
      await("the watch thread ends after close").atMost(Duration.ofSeconds(5)).until(() -> !thread.isAlive());
      assertThat(pool.getHikariPoolMXBean().getActiveConnections()).as("connections still borrowed").isZero();
      proxy.pass();
    }
  }

  private static Optional<Thread> watchThread(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("sluice-release-watch-" + prefix)).findFirst();
  }
}
