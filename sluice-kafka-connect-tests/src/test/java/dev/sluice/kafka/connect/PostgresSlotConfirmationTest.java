package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTaskContext;
import org.apache.kafka.connect.storage.OffsetStorageReader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A task on PostgreSQL confirms to its replication slot exactly what Connect committed, never
 * what it only handed out: with 10 changes handed and the offset of the 4th committed, the slot's
 * confirmed_flush_lsn is the 4th change's position; a task started after a crash at that moment
 * resumes from the 4th and publishes the 5th to 10th, none lost. Connect's offset store is stood in
 * for by a map here, so that the test decides exactly what was committed (the real worker's store
 * is in {@link PostgresConnectTest}); the server, slot and task are real.
 */
class PostgresSlotConfirmationTest {
  private static final String DB = "connect_slot";
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
  void theSlotIsConfirmedTheCommittedOffsetAndARestartedTaskResumesThere() throws Exception {
    Map<Map<String, Object>, Map<String, Object>> committed = new ConcurrentHashMap<>();
    Map<String, String> config = taskConfig("slotconf", "0/1@public.items");

    SluiceSourceTask task = start(config, committed);
    List<SourceRecord> changes = new ArrayList<>();
    try {
      // The start point is pinned by a heartbeat first; committing it is what a worker does.
      List<SourceRecord> first = pollUntil(task, r -> true, 1);
      commit(committed, first.get(0));
      String created = lsnOf(first.get(0));
      for (int i = 0; i < 10; i++) {
        sql("INSERT INTO items (id, seq) VALUES ('k" + i + "', " + i + ")");
      }
      changes.addAll(pollUntil(task, PostgresSlotConfirmationTest::isChange, 10));
      assertThat(changes).extracting(r -> r.key()).as("qualified by the table (ADR 0093)").containsExactly(
          items(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
      assertThat(confirmed()).as("nothing committed but the start").isEqualTo(created);

      commit(committed, changes.get(3));
      String fourth = lsnOf(changes.get(3));
      assertThat(fourth).isNotEqualTo(lsnOf(changes.get(9)));
      await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> {
        task.poll(); // confirmation runs on the task's reading thread (ADR 0129)
        assertThat(confirmed()).isEqualTo(fourth);
      });
      for (int i = 0; i < 5; i++) {
        task.poll();
        assertThat(confirmed()).as("never past the committed offset").isEqualTo(fourth);
      }
    } finally {
      task.stop(); // a crash: nothing after the 4th change is committed
    }

    SluiceSourceTask restarted = start(config, committed);
    try {
      List<SourceRecord> again = pollUntil(restarted, PostgresSlotConfirmationTest::isChange, 6);
      assertThat(again).extracting(r -> r.key()).containsExactly(items(4, 5, 6, 7, 8, 9));
    } finally {
      restarted.stop();
    }
  }

  /**
   * A partition whose rows see no change while the rest of the table does still moves: its
   * position passes the other partition's transactions, a heartbeat carries it as the offset, and
   * once that is committed the slot is confirmed there, so an idle partition does not hold WAL.
   */
  @Test
  void anIdlePartitionsSlotMovesWithItsHeartbeats() throws Exception {
    Map<Map<String, Object>, Map<String, Object>> committed = new ConcurrentHashMap<>();
    Map<String, String> config = taskConfig("idle", "0/2@public.items"); // this task reads partition 0 only
    config.put("partitions", "2");
    config.put("heartbeat.interval.ms", "100");
    SluiceSourceTask task = start(config, committed);
    try {
      SourceRecord pin = pollUntil(task, r -> true, 1).get(0);
      commit(committed, pin);
      String created = slotConfirmed("idle_public_items_0of2");
      int written = 0;
      for (int i = 0; written < 5; i++) {
        String key = "idle" + i;
        if (dev.sluice.feed.PartitionSpec.indexOf("public.items[\"" + key + "\"]", 2) == 1) { // ADR 0093
          sql("INSERT INTO items (id, seq) VALUES ('" + key + "', " + i + ")");
          written++;
        }
      }
      List<SourceRecord> heartbeats = new ArrayList<>();
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        List<SourceRecord> batch = task.poll();
        if (batch != null) {
          assertThat(batch).as("no change of partition 1 reaches partition 0").noneMatch(PostgresSlotConfirmationTest::isChange);
          heartbeats.addAll(batch);
        }
        return !heartbeats.isEmpty() && !lsnOf(heartbeats.get(heartbeats.size() - 1)).equals(created);
      });
      SourceRecord last = heartbeats.get(heartbeats.size() - 1);
      commit(committed, last);
      await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> {
        task.poll();
        assertThat(slotConfirmed("idle_public_items_0of2")).isEqualTo(lsnOf(last)).isNotEqualTo(created);
      });
    } finally {
      task.stop();
    }
  }

  /** The configuration Connect gives task 0 of connector {@code name} holding {@code units}. */
  private static Map<String, String> taskConfig(String name, String units) {
    Map<String, String> config = new HashMap<>();
    config.put("name", name);
    config.put("source.type", "postgresql");
    config.put("postgres.url", pg.jdbcUrl(DB));
    config.put("postgres.publication", "pub_items");
    config.put("postgres.tables", "public.items");
    config.put("offset.confirm.interval.ms", "100");
    config.put("poll.max.wait.ms", "100");
    config.put(SluiceSourceConfig.TASK_UNITS, units);
    config.put(SluiceSourceConfig.TASK_INDEX, "0");
    return config;
  }

  private static SluiceSourceTask start(Map<String, String> config, Map<Map<String, Object>, Map<String, Object>> store) {
    return StandaloneTask.start(config, store);
  }

  @SuppressWarnings("unchecked")
  private static void commit(Map<Map<String, Object>, Map<String, Object>> store, SourceRecord r) {
    store.put(new HashMap<>((Map<String, Object>) r.sourcePartition()), new HashMap<>((Map<String, Object>) r.sourceOffset()));
  }

  private static boolean isChange(SourceRecord r) {
    return r.value() instanceof Struct s && s.schema().name().equals("dev.sluice.kafka.connect.Change");
  }

  private static List<SourceRecord> pollUntil(SluiceSourceTask task, java.util.function.Predicate<SourceRecord> which,
      int count) {
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

  /** The record keys of rows {@code 'k<i>'} of public.items. */
  private static String[] items(int... ids) {
    return java.util.Arrays.stream(ids).mapToObj(i -> "public.items[\"k" + i + "\"]").toArray(String[]::new);
  }

  /** The WAL position (LSN) a record's offset holds: the position token's first word. */
  private static String lsnOf(SourceRecord r) {
    return r.sourceOffset().get("position").toString().trim().split("\\s+")[0];
  }

  private static String confirmed() throws SQLException {
    return slotConfirmed("slotconf_public_items_0of1");
  }

  /** The confirmed_flush_lsn of slot {@code sluicekc_<db>_<suffix>}. */
  private static String slotConfirmed(String suffix) throws SQLException {
    try (Connection c = db.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE database = '" + DB
            + "' AND slot_name = 'sluicekc_" + DB + "_" + suffix + "'")) {
      return rs.next() ? rs.getString(1) : null;
    }
  }

  private static void sql(String statement) throws SQLException {
    try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
      st.execute(statement);
    }
  }
}
