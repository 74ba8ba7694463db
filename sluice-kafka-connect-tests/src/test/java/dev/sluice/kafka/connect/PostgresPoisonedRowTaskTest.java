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
 * Issue 33 defect 1 in Kafka Connect: a PostgreSQL row the feed cannot convert used to throw out of
 * the task's poll, so the task failed and, restarted, failed again at the same row. It is now an
 * undecodable change: with {@code undecodable.policy=park} it goes to the parked topic, naming the
 * column, with the later changes of its key, and the other keys' changes are published.
 */
class PostgresPoisonedRowTaskTest {
  private static final String DB = "connect_poison";
  /** A jsonb document the server holds exactly and Jackson refuses (numbers up to 1000 digits). */
  private static final String POISON = "('{\"n\": 1' || repeat('0', 1200) || '}')::jsonb";
  private static EmbeddedPostgresServer pg;
  private static DataSource db;

  @BeforeAll
  static void server() throws SQLException {
    pg = SharedServers.postgres();
    db = pg.dataSource(pg.createDatabase(DB));
    pg.dropReplicationSlots(DB);
    sql("DROP PUBLICATION IF EXISTS pub_items", "DROP TABLE IF EXISTS items",
        "CREATE TABLE items (id text PRIMARY KEY, seq int NOT NULL, doc jsonb)",
        "CREATE PUBLICATION pub_items FOR TABLE items");
  }

  @AfterAll
  static void slots() {
    pg.dropReplicationSlots(DB);
  }

  @Test
  void aPoisonedRowIsParkedWithItsKeysLaterChangesAndTheOtherKeysArePublished() throws Exception {
    Map<String, String> config = new HashMap<>();
    config.put("name", "poison");
    config.put("source.type", "postgresql");
    config.put("postgres.url", pg.jdbcUrl(DB));
    config.put("postgres.publication", "pub_items");
    config.put("postgres.tables", "public.items");
    config.put("poll.max.wait.ms", "100");
    config.put(SluiceSourceConfig.UNDECODABLE_POLICY, "park");
    config.put(SluiceSourceConfig.TASK_UNITS, "0/1@public.items");
    config.put(SluiceSourceConfig.TASK_INDEX, "0");
    SluiceSourceTask task = StandaloneTask.start(config, Map.of());
    try {
      pollUntil(task, 1); // the start point is pinned by a heartbeat first
      sql("INSERT INTO items VALUES ('k0', 0, '{}')",
          "INSERT INTO items VALUES ('k1', 1, " + POISON + ")",
          "INSERT INTO items VALUES ('k2', 2, '{}')",
          "UPDATE items SET seq = 11, doc = '{}' WHERE id = 'k1'",
          "INSERT INTO items VALUES ('k3', 3, '{}')");
      List<SourceRecord> records = pollUntil(task, 5, r -> isChange(r) || isParked(r));
      assertThat(records).filteredOn(PostgresPoisonedRowTaskTest::isChange).extracting(SourceRecord::key)
          .containsExactly(key("k0"), key("k2"), key("k3"));
      List<SourceRecord> parked = records.stream().filter(PostgresPoisonedRowTaskTest::isParked).toList();
      assertThat(parked).extracting(SourceRecord::key).containsExactly(key("k1"), key("k1"));
      assertThat(((Struct) parked.get(0).value()).getString("reason")).contains("public.items").contains("column doc")
          .contains("type jsonb").contains("{\"n\": 1000");
      assertThat(((Struct) parked.get(0).value()).getString("raw")).as("the row's texts are kept").contains("k1");
    } finally {
      task.stop();
    }
  }

  private static boolean isChange(SourceRecord r) {
    return r.value() instanceof Struct s && s.schema().name().equals("dev.sluice.kafka.connect.Change");
  }

  private static boolean isParked(SourceRecord r) {
    return r.value() instanceof Struct s && s.schema().name().equals("dev.sluice.kafka.connect.Parked");
  }

  private static List<SourceRecord> pollUntil(SluiceSourceTask task, int count) {
    return pollUntil(task, count, r -> true);
  }

  private static List<SourceRecord> pollUntil(SluiceSourceTask task, int count,
      java.util.function.Predicate<SourceRecord> which) {
    List<SourceRecord> out = new ArrayList<>();
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      List<SourceRecord> batch = task.poll();
      if (batch != null) {
        batch.stream().filter(which).forEach(out::add);
      }
      return out.size() >= count;
    });
    return out;
  }

  private static void sql(String... statements) throws SQLException {
    try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
      for (String s : statements) {
        st.execute(s);
      }
    }
  }

  /** A row's key: its table and its primary key (ADR 0093). */
  private static String key(String id) {
    return "public.items[\"" + id + "\"]";
  }
}
