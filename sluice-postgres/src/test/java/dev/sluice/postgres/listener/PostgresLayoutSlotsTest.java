package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ListenerOnPostgresTest.simple;
import static dev.sluice.postgres.listener.ListenerOnPostgresTest.sql;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 defect 6: the error that refuses a group's new partition count names the old layout's
 * replication slots, which keep WAL until dropped, and how to drop them, besides the lease records.
 */
class PostgresLayoutSlotsTest {

  @Test
  void theRefusalOfANewPartitionCountNamesTheOldLayoutsSlots() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("pglayoutslots");
    String url = pg.jdbcUrl(db);
    try {
      sql(simple(url), "CREATE TABLE orders (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE orders");
      Listener<Map<String, Object>> two = listener(url, 2).start();
      await().atMost(Duration.ofSeconds(30)).until(() -> two.status().size() == 2 && two.status().stream()
          .allMatch(s -> s.state() == PartitionState.ACTIVE && s.committed() != null));
      two.close();

      PostgresChangeFeed feed = feed(url).forGroup("g");
      assertThatThrownBy(() -> listener(url, 3).start().close())
          .isInstanceOf(ConfigurationException.class)
          .hasMessageContaining("already has partition records for 2 partitions")
          .hasMessageContaining("delete the group's records")
          .hasMessageContaining(feed.slotName(new PartitionSpec(0, 2)))
          .hasMessageContaining(feed.slotName(new PartitionSpec(1, 2)))
          .hasMessageContaining("keep WAL")
          .hasMessageContaining("sluice slots");
    } finally {
      pg.dropReplicationSlots(db);
    }
  }

  private static PostgresChangeFeed feed(String url) {
    return PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build();
  }

  private static Listener<Map<String, Object>> listener(String url, int partitions) {
    return Listener.builder(feed(url), SqlLeaseStore.builder(simple(url)).build())
        .group("g")
        .owner("a")
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(3))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
        .handler((change, fence) -> { })
        .build();
  }
}
