package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTaskContext;
import org.apache.kafka.connect.storage.OffsetStorageReader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 item 3 (ADR 0096): with {@code postgres.messages.prefixes} the connector publishes the
 * logical-decoding messages of those prefixes as stream {@code messages} (topic
 * {@code <prefix>.<database>.messages}, record key the prefix, operation MESSAGE), once: the
 * tables' streams carry their rows only. A task on a real PostgreSQL; Connect's offset store is
 * an empty map.
 */
class PostgresConnectorMessagesTest {
  private static final String DB = "connect_messages";
  private static EmbeddedPostgresServer pg;
  private static DataSource db;

  @BeforeAll
  static void server() throws SQLException {
    pg = SharedServers.postgres();
    db = pg.dataSource(pg.createDatabase(DB));
    try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE items (id text PRIMARY KEY, seq int NOT NULL)");
      st.execute("CREATE PUBLICATION pub_items FOR TABLE items");
    }
  }

  @AfterAll
  static void slots() {
    pg.dropReplicationSlots(DB);
  }

  @Test
  void messagesOfTheConfiguredPrefixesArePublishedOnceAsAStreamOfTheirOwn() throws Exception {
    Map<String, String> config = new HashMap<>();
    config.put("name", "outboxconn");
    config.put("source.type", "postgresql");
    config.put("postgres.url", pg.jdbcUrl(DB));
    config.put("postgres.publication", "pub_items");
    config.put("postgres.tables", "public.items");
    config.put("postgres.messages.prefixes", "outbox");
    config.put("poll.max.wait.ms", "100");
    assertThat(new SluiceSourceConfig(config).streams()).containsExactly("public.items", "messages");
    SluiceSourceTask task = start(config, "0/1@public.items,0/1@messages");
    try {
      List<SourceRecord> records = new ArrayList<>();
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        List<SourceRecord> batch = task.poll();
        if (batch != null) {
          records.addAll(batch);
        }
        return slotsReady(); // both streams' slots exist: what is written now is streamed
      });
      try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
        c.setAutoCommit(false);
        st.execute("INSERT INTO items VALUES ('a', 1)");
        st.execute("SELECT pg_logical_emit_message(true, 'outbox:order-1', '{\"eventId\":\"e1\"}')");
        st.execute("SELECT pg_logical_emit_message(true, 'audit', 'not asked for')");
        c.commit();
      }
      List<SourceRecord> changes = new ArrayList<>();
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        List<SourceRecord> batch = task.poll();
        if (batch != null) {
          batch.stream().filter(r -> r.value() instanceof Struct s
              && s.schema().name().equals("dev.sluice.kafka.connect.Change")).forEach(changes::add);
        }
        return changes.size() >= 2;
      });
      // One more poll: nothing else (no second copy of the message, nothing of prefix audit).
      List<SourceRecord> more = task.poll();
      if (more != null) {
        more.stream().filter(r -> r.value() instanceof Struct s
            && s.schema().name().equals("dev.sluice.kafka.connect.Change")).forEach(changes::add);
      }
      assertThat(changes).hasSize(2);
      SourceRecord row = changes.stream().filter(r -> r.topic().endsWith(".public.items")).findFirst().orElseThrow();
      assertThat(((Struct) row.value()).getString("operation")).isEqualTo("INSERT");
      SourceRecord message = changes.stream().filter(r -> r.topic().endsWith("." + DB + ".messages")).findFirst()
          .orElseThrow();
      assertThat(message.key()).isEqualTo("outbox:order-1");
      Struct value = (Struct) message.value();
      assertThat(value.getString("operation")).isEqualTo("MESSAGE");
      assertThat(value.getString("stream")).isEqualTo("messages");
      assertThat(value.getString("document")).contains("\"prefix\":\"outbox:order-1\"")
          .contains("eventId").contains("\"transactional\":true");
    } finally {
      task.stop();
    }
  }

  private static boolean slotsReady() throws SQLException {
    try (Connection c = db.getConnection(); Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SELECT count(*) FROM pg_replication_slots WHERE database = '" + DB
            + "'")) {
      rs.next();
      return rs.getInt(1) == 2;
    }
  }

  private static SluiceSourceTask start(Map<String, String> base, String units) {
    Map<String, String> config = new HashMap<>(base);
    config.put(SluiceSourceConfig.TASK_UNITS, units);
    config.put(SluiceSourceConfig.TASK_INDEX, "0");
    return StandaloneTask.start(config, Map.of());
  }

}
