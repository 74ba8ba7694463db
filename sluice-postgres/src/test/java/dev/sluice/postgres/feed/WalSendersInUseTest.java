package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.Map;
import java.util.Properties;
import org.junit.jupiter.api.Test;
import org.postgresql.PGProperty;

/**
 * A server whose WAL senders are all in use refuses a new replication connection with SQLSTATE
 * 53300 ("number of requested standby connections exceeds max_wal_senders"). On a real deployment
 * it passes by itself: during a rolling deploy the old process's walsender ends a moment after the
 * new process starts, and another application's reader may end. Before, the feed took the refusal
 * for a permanent error and the partition stopped for good (FAILED). A real server answers here, one
 * started with {@code max_wal_senders = 1}, whose only sender the test holds.
 */
class WalSendersInUseTest {

  @Test
  void aFeedOpeningWhileEveryWalSenderIsInUseFailsRetryablyAndOpensOnceOneIsFree() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start(Map.of("max_wal_senders", "1"))) {
      String database = pg.createDatabase("walsenders");
      try (Connection c = pg.dataSource(database).getConnection(); Statement s = c.createStatement()) {
        s.execute("CREATE TABLE public.orders (id int PRIMARY KEY)");
        s.execute("CREATE PUBLICATION pub FOR TABLE public.orders");
      }
      PostgresChangeFeed feed = PostgresChangeFeed.builder(pg.jdbcUrl(database), EmbeddedPostgresServer.USER, null,
          "pub").table("public.orders").build();

      try (Connection sender = replicationConnection(pg, database)) {
        assertThat(sender.isValid(5)).as("the test holds the server's only WAL sender").isTrue();
        assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()).close())
            .isInstanceOfSatisfying(FeedException.class, e -> {
              assertThat(e.getMessage()).as("the server's answer, named").contains("53300").contains("max_wal_senders");
              assertThat(e.retryable()).as("a sender frees up by itself: the partition must try again, not stop"
                  + " for good: %s", e.getMessage()).isTrue();
            });
      }

      try (FeedCursor<?> opened = feed.open(PartitionSpec.single(), StartPoint.latest())) {
        assertThat(opened.position()).as("opens once the sender is free").isNotNull();
      }
    }
  }

  /** A replication connection: the server starts a WAL sender for it until it is closed. */
  private static Connection replicationConnection(EmbeddedPostgresServer pg, String database) throws Exception {
    Properties p = new Properties();
    PGProperty.USER.set(p, EmbeddedPostgresServer.USER);
    PGProperty.REPLICATION.set(p, "database");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "9.4");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    return DriverManager.getConnection(pg.jdbcUrl(database), p);
  }
}
