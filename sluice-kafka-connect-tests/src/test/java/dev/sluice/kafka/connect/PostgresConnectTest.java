package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The connector on a PostgreSQL publication, on a real three-worker Connect cluster with
 * exactly-once source support: a table's changes split into 4 partitions (a replication slot
 * each) over 4 tasks; a worker in a child JVM is killed with SIGKILL mid-stream and another
 * added, then the whole cluster stops while changes are written, and a new one resumes. The topic
 * read with read_committed holds every change exactly once in per-key order. The slots are
 * confirmed only what Connect committed: they move (the server may recycle WAL), and a restarted
 * task always finds its committed position still in its slot (had a slot been confirmed past the
 * committed offset, the task would fail with "has already confirmed ..., past the checkpoint"
 * and the changes in between would be lost).
 */
class PostgresConnectTest {
  private static final String DB = "connect_pg";
  private static EmbeddedKafka kafka;
  private static EmbeddedPostgresServer pg;
  private static DataSource db;
  private static ConnectCluster cluster;

  @BeforeAll
  static void servers() throws SQLException {
    kafka = SharedServers.kafka();
    pg = SharedServers.postgres();
    db = pg.dataSource(pg.createDatabase(DB));
    try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE orders (id text PRIMARY KEY, seq int NOT NULL)");
      st.execute("CREATE PUBLICATION pub_orders FOR TABLE orders");
    }
    cluster = new ConnectCluster(kafka.bootstrapServers(), "pgeos", true);
  }

  @AfterAll
  static void close() {
    cluster.close();
    pg.dropReplicationSlots(DB);
  }

  @Test
  void aKilledWorkerAndAWholeClusterRestartLeaveEveryChangeExactlyOnceAndTheSlotsConfirmedOnlyWhatWasCommitted()
      throws Exception {
    KeyedWrites writes = new KeyedWrites(KeyedWrites.postgres(db, "orders"), 8);
    String topic = "sluice." + DB + ".public.orders";

    // The worker to be killed joins last, so it is not the group's leader: with exactly-once
    // support a task that starts asks the leader (over REST) to fence its zombies, and Connect fails
    // for good a task whose request went to a leader killed at that moment (it waits for an
    // operator's restart). That is Connect's availability, not the exactly-once guarantee this tests.
    cluster.startWorker();
    cluster.startWorker();
    ChildJvm doomed = cluster.startChildWorker("pg-worker-1");

    Map<String, String> config = ConnectCluster.postgresConnector(pg.jdbcUrl(DB), "pub_orders", "public.orders", 4, 4);
    // Through Connect's REST validate: a table the publication does not publish, under its key.
    Map<String, String> bad = new HashMap<>(config);
    bad.put("postgres.tables", "public.orders,public.nosuch");
    JsonNode result = cluster.put("/connector-plugins/SluiceSourceConnector/config/validate", bad);
    assertThat(ExactlyOnceConnectTest.errors(result, "postgres.tables"))
        .anySatisfy(e -> assertThat(e).contains("does not publish public.nosuch"));

    config.put("exactly.once.support", "required");
    config.put("offset.confirm.interval.ms", "300");
    config.put("heartbeat.interval.ms", "500");
    cluster.putConnectorWithTasksOn(doomed, "pgorders", config, 4);
    await().atMost(Duration.ofSeconds(30)).until(() -> slots().size() == 4);
    Map<String, Long> created = slots();

    // SIGKILL mid-stream: its open transactions abort, its replication connections drop.
    cluster.killWorkerMidStream(doomed, "pgorders", 4, writes, topic, 80, 80);
    writes.assertExactlyOnceInOrder(KeyedWrites.read(kafka.bootstrapServers(), topic));

    // Every slot was confirmed past where it was created (heartbeats move partitions without
    // changes), so the server can recycle WAL.
    await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(slots()).allSatisfy(
        (slot, confirmed) -> assertThat(confirmed).as(slot).isGreaterThan(created.get(slot))));

    // The whole cluster goes down; changes arrive meanwhile; a new cluster resumes from the offsets.
    cluster.restartAllWhileWriting(writes, 20, topic);
    writes.assertExactlyOnceInOrder(KeyedWrites.read(kafka.bootstrapServers(), topic));
    assertThat(cluster.running("pgorders", 4)).isTrue();

    JsonNode offsets = cluster.get("/connectors/pgorders/offsets").path("offsets");
    assertThat(offsets).as(offsets.toString()).hasSize(4);
    offsets.forEach(o -> {
      assertThat(o.path("partition").path("stream").asText()).isEqualTo("public.orders");
      assertThat(o.path("offset").path("position").asText()).isNotBlank();
    });
  }

  /** The confirmed_flush_lsn of each of the connector's slots, by slot name. */
  private static Map<String, Long> slots() throws SQLException {
    Map<String, Long> out = new HashMap<>();
    try (Connection c = db.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT slot_name, confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots"
            + " WHERE database = '" + DB + "' AND slot_name LIKE 'sluicekc_" + DB + "_pgorders_public_orders_%of4'")) {
      while (rs.next()) {
        out.put(rs.getString(1), rs.getLong(2));
      }
    }
    return out;
  }
}
