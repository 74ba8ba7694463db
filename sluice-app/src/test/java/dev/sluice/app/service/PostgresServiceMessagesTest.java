package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.app.service.config.ConfigException;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 item 3 (ADR 0096) in the service's configuration: {@code listeners[].messages} gives the
 * entry's feed the prefixes of the logical-decoding messages it relays; under a mongodb source the
 * key is refused, naming it.
 */
class PostgresServiceMessagesTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private final String db = PG.createDatabase("svcmessages");

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  @Test
  void anEntrysMessagesPrefixesReachItsFeedAndAMongodbSourceRefusesTheKey() throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY)");
      s.execute("DROP PUBLICATION IF EXISTS pub");
      s.execute("CREATE PUBLICATION pub FOR TABLE orders");
    }
    SluiceConfig config = ConfigLoader.parse("""
        postgres:
          url: "%s"
          user: %s
          publication: pub
        listeners:
          - table: public.orders
            messages: "outbox, audit"
            sink:
              kafka: { bootstrapServers: "localhost:9", topic: orders }
        """.formatted(PG.jdbcUrl(db), EmbeddedPostgresServer.USER), "sluice.yaml", name -> null);
    assertThat(config.listeners().get(0).messagePrefixes()).containsExactly("outbox", "audit");
    try (PostgresSource source = new PostgresSource(config.postgres(), config.listeners());
        FeedCursor<Map<String, Object>> cursor = source.feed(config.listeners().get(0), "listeners[0]")
            .open(PartitionSpec.single(), StartPoint.latest())) {
      try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
        s.execute("SELECT pg_logical_emit_message(true, 'other', 'x')");
        s.execute("SELECT pg_logical_emit_message(true, 'audit:1', 'a')");
        s.execute("INSERT INTO orders VALUES (1)");
      }
      List<ChangeEvent<Map<String, Object>>> events = new ArrayList<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (events.size() < 2 && System.nanoTime() < deadline) {
        events.addAll(cursor.poll(Duration.ofMillis(200)));
      }
      assertThat(events).extracting(e -> e.operation() + " " + e.key())
          .containsExactly(Operation.MESSAGE + " audit:1", Operation.INSERT + " public.orders[\"1\"]");
    }

    assertThatThrownBy(() -> ConfigLoader.parse("""
        mongodb: { uri: "mongodb://localhost", database: shop }
        listeners:
          - collection: orders
            messages: outbox
            sink:
              kafka: { bootstrapServers: "localhost:9", topic: orders }
        """, "sluice.yaml", name -> null))
        .isInstanceOf(ConfigException.class)
        .hasMessageContaining("listeners[0].messages")
        .hasMessageContaining("postgres");
  }
}
