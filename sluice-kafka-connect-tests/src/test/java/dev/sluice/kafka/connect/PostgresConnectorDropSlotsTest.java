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
import java.util.concurrent.CompletableFuture;
import javax.sql.DataSource;
import org.apache.kafka.connect.source.SourceTaskContext;
import org.apache.kafka.connect.storage.OffsetStorageReader;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 defect 6: with {@code postgres.slot.drop.on.stop=true} a stopped (deleted) connector
 * drops its replication slots, waiting for a task that still holds one to let go; by default the
 * slots outlive it. The server and tasks are real; Connect's offset store is an empty map.
 */
class PostgresConnectorDropSlotsTest {
  private static final String DB = "connect_dropslots";
  private static EmbeddedPostgresServer pg;
  private static DataSource db;

  @BeforeAll
  static void server() throws SQLException {
    pg = SharedServers.postgres();
    db = pg.dataSource(pg.createDatabase(DB));
    try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE items (id text PRIMARY KEY, seq int NOT NULL)");
      st.execute("CREATE TABLE other (id text PRIMARY KEY)");
      st.execute("CREATE PUBLICATION pub_items FOR TABLE items, other");
    }
  }

  @AfterAll
  static void slots() {
    pg.dropReplicationSlots(DB);
  }

  @Test
  void aConnectorStoppedWithDropOnStopDropsItsSlotsAfterItsTasksLetGoAndByDefaultKeepsThem() throws Exception {
    // By default: the slots outlive the connector.
    Map<String, String> keeping = config("keeper", false);
    runTasksOnce(keeping);
    SluiceSourceConnector connector = new SluiceSourceConnector();
    connector.start(keeping);
    connector.stop();
    assertThat(slots("keeper")).hasSize(4);

    // Dropping: a task still reads one slot while the connector stops; the connector waits for it.
    Map<String, String> dropping = config("dropper", true);
    runTasksOnce(dropping);
    SluiceSourceTask holder = start(dropping, "0/2@public.items");
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      holder.poll();
      return active("dropper_public_items_0of2");
    });
    SluiceSourceConnector deleted = new SluiceSourceConnector();
    deleted.start(dropping);
    CompletableFuture<Void> stopping = CompletableFuture.runAsync(deleted::stop);
    await().atMost(Duration.ofSeconds(10)).until(() -> slots("dropper").size() == 1);
    assertThat(slots("dropper")).as("the held slot waits for its reader").containsExactly(
        "sluicekc_" + DB + "_dropper_public_items_0of2");
    assertThat(stopping).isNotDone();
    holder.stop();
    stopping.get(40, java.util.concurrent.TimeUnit.SECONDS);
    assertThat(slots("dropper")).isEmpty();
    assertThat(slots("keeper")).as("another connector's slots are left").hasSize(4);
  }

  private static Map<String, String> config(String name, boolean drop) {
    Map<String, String> config = new HashMap<>();
    config.put("name", name);
    config.put("source.type", "postgresql");
    config.put("postgres.url", pg.jdbcUrl(DB));
    config.put("postgres.publication", "pub_items");
    config.put("postgres.tables", "public.items,public.other");
    config.put("partitions", "2");
    config.put("poll.max.wait.ms", "100");
    config.put("postgres.slot.drop.on.stop", Boolean.toString(drop));
    return config;
  }

  /** Starts a task of every unit once and stops it: each table's partitions get their slots. */
  private static void runTasksOnce(Map<String, String> config) {
    SluiceSourceTask task = start(config, "0/2@public.items,1/2@public.items,0/2@public.other,1/2@public.other");
    try {
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        task.poll();
        return slots(config.get("name")).size() == 4;
      });
    } finally {
      task.stop();
    }
  }

  private static SluiceSourceTask start(Map<String, String> base, String units) {
    Map<String, String> config = new HashMap<>(base);
    config.put(SluiceSourceConfig.TASK_UNITS, units);
    config.put(SluiceSourceConfig.TASK_INDEX, "0");
    return StandaloneTask.start(config, Map.of());
  }

  private static List<String> slots(String connector) throws SQLException {
    List<String> out = new ArrayList<>();
    try (Connection c = db.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT slot_name FROM pg_replication_slots WHERE database = '" + DB
            + "' AND slot_name LIKE 'sluicekc\\_" + DB.replace("_", "\\_") + "\\_" + connector + "\\_%' ORDER BY 1")) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  private static boolean active(String suffix) throws SQLException {
    try (Connection c = db.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT active FROM pg_replication_slots WHERE slot_name = 'sluicekc_" + DB + "_"
            + suffix + "'")) {
      return rs.next() && rs.getBoolean(1);
    }
  }
}
