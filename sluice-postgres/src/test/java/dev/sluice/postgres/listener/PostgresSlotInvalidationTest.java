package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ListenerOnPostgresTest.simple;
import static dev.sluice.postgres.listener.ListenerOnPostgresTest.sql;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresFeedMetrics;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * Issue 13 item 4 on a real PostgreSQL 17 with {@code max_slot_wal_keep_size} = 32 MB: a slot left
 * behind while 100+ MB of WAL is written is invalidated by the server (wal_status lost); its
 * checkpoint is lost history that goes through the listener's policy (STOP fails the partition,
 * SKIP_TO_LATEST reports the gap and continues on a new slot), and the slot gauges show the WAL it
 * keeps and how close it came to the limit.
 */
class PostgresSlotInvalidationTest {

  private final List<Integer> seen = new CopyOnWriteArrayList<>();
  private final AtomicReference<Position> lastPosition = new AtomicReference<>();

  @Test
  void aSlotInvalidatedForFallingBehindIsLostHistoryThroughThePolicyAndTheGaugesShowItComing() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("pginvalid");
      String url = pg.jdbcUrl(db);
      DataSource ds = simple(url);
      sql(ds, "ALTER SYSTEM SET max_slot_wal_keep_size = '32MB'", "SELECT pg_reload_conf()",
          "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders",
          "CREATE TABLE filler (id bigserial PRIMARY KEY, pad text)");
      PostgresChangeFeed feed = feed(url).forGroup("g"); // the listener's group's slots
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      PostgresFeedMetrics.bind(registry, feed, 1);
      String slot = feed.slotName(PartitionSpec.single());

      // 1. A listener processes ten rows and stops: its checkpoint stays in the lease store.
      Listener<Map<String, Object>> first = listener(url, HistoryLostPolicy.STOP, seen, new CopyOnWriteArrayList<>());
      await().atMost(Duration.ofSeconds(30)).until(() -> first.status().get(0).committed() != null);
      for (int i = 0; i < 10; i++) {
        sql(ds, "INSERT INTO orders VALUES (" + i + ", " + i + ")");
      }
      await().atMost(Duration.ofSeconds(30)).until(() -> seen.size() == 10);
      Position last = lastPosition.get();
      await().atMost(Duration.ofSeconds(30)).until(() -> last.equals(first.status().get(0).committed()));
      Position checkpoint = first.status().get(0).committed();
      first.close();

      double safeBefore = gauge(registry, "sluice.pg.slot.safe.bytes");
      // The server counts whole 16 MB segments: the limit plus what is left of the segments in use.
      assertThat(safeBefore).as("safe bytes under a 32 MB limit").isPositive().isLessThan(64 * 1024 * 1024);

      // 2. WAL is written while nobody reads the slot: the gauges show it approaching the limit.
      writeWal(ds, 8);
      assertThat(gauge(registry, "sluice.pg.slot.retained.bytes")).as("WAL the idle slot keeps")
          .isGreaterThan(4 * 1024 * 1024);
      double safeAfter = gauge(registry, "sluice.pg.slot.safe.bytes");
      assertThat(safeAfter).as("closer to the limit").isLessThan(safeBefore);
      await().atMost(Duration.ofSeconds(120)).pollInterval(Duration.ofMillis(200)).until(() -> {
        writeWal(ds, 8);
        return "lost".equals(feed.slot(PartitionSpec.single()).orElseThrow().walStatus());
      });

      // 3. The checkpoint cannot be resumed: the error says why and what to do.
      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.after(checkpoint)))
          .isInstanceOf(HistoryLostException.class)
          .hasMessageContaining("replication slot " + slot + " was invalidated")
          .hasMessageContaining("max_slot_wal_keep_size");

      // 4. Policy STOP: the partition fails, the gap is reported, nothing is delivered past it.
      List<String> gaps = new CopyOnWriteArrayList<>();
      Listener<Map<String, Object>> stopping = listener(url, HistoryLostPolicy.STOP, seen, gaps);
      await().atMost(Duration.ofSeconds(30)).until(() -> stopping.status().get(0).state() == PartitionState.FAILED);
      assertThat(stopping.status().get(0).error()).contains("invalidated");
      assertThat(gaps).containsExactly("stopped");
      stopping.close();
      assertThat(feed.slot(PartitionSpec.single()).orElseThrow().walStatus()).as("STOP leaves the slot as it is")
          .isEqualTo("lost");

      // 5. Policy SKIP_TO_LATEST: the gap is reported, a new slot starts, new rows arrive.
      gaps.clear();
      Listener<Map<String, Object>> skipping = listener(url, HistoryLostPolicy.SKIP_TO_LATEST, seen, gaps);
      await().atMost(Duration.ofSeconds(30)).until(() -> skipping.status().get(0).state() == PartitionState.ACTIVE
          && !gaps.isEmpty());
      assertThat(gaps).singleElement().asString().startsWith("resumed at ");
      for (int i = 100; i < 110; i++) {
        sql(ds, "INSERT INTO orders VALUES (" + i + ", " + i + ")");
      }
      await().atMost(Duration.ofSeconds(30)).until(() -> seen.containsAll(List.of(100, 101, 102, 103, 104, 105,
          106, 107, 108, 109)));
      assertThat(seen).hasSize(20);
      assertThat(feed.slot(PartitionSpec.single()).orElseThrow().walStatus()).isIn("reserved", "extended");
      assertThat(gauge(registry, "sluice.pg.slot.safe.bytes")).isGreaterThan(safeAfter);
      skipping.close();
    }
  }

  /**
   * Issue 33 defect 6: a slot an operator dropped while its partition has a checkpoint is lost
   * history through the policy, never created again by a resume (a new slot there would start
   * now and skip what was written in between without a word). STOP leaves no slot behind;
   * SKIP_TO_LATEST records the gap and creates the slot for its new start.
   */
  @Test
  void aSlotDroppedByTheOperatorWhileACheckpointExistsIsLostHistoryAndNotCreatedAgainByTheResume() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("pgdropped");
      String url = pg.jdbcUrl(db);
      DataSource ds = simple(url);
      sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders");
      PostgresChangeFeed feed = feed(url).forGroup("g");
      String slot = feed.slotName(PartitionSpec.single());

      Listener<Map<String, Object>> first = listener(url, HistoryLostPolicy.STOP, seen, new CopyOnWriteArrayList<>());
      await().atMost(Duration.ofSeconds(30)).until(() -> first.status().get(0).committed() != null);
      for (int i = 0; i < 5; i++) {
        sql(ds, "INSERT INTO orders VALUES (" + i + ", " + i + ")");
      }
      await().atMost(Duration.ofSeconds(30)).until(() -> seen.size() == 5);
      Position last = lastPosition.get();
      await().atMost(Duration.ofSeconds(30)).until(() -> last.equals(first.status().get(0).committed()));
      first.close();

      // The operator drops the slot; rows written afterwards are in no slot's history.
      await().atMost(Duration.ofSeconds(30)).until(() -> !feed.slot(PartitionSpec.single()).orElseThrow().active());
      sql(ds, "SELECT pg_drop_replication_slot('" + slot + "')");
      for (int i = 5; i < 10; i++) {
        sql(ds, "INSERT INTO orders VALUES (" + i + ", " + i + ")");
      }

      List<String> gaps = new CopyOnWriteArrayList<>();
      Listener<Map<String, Object>> stopping = listener(url, HistoryLostPolicy.STOP, seen, gaps);
      await().atMost(Duration.ofSeconds(30)).until(() -> stopping.status().get(0).state() == PartitionState.FAILED);
      assertThat(stopping.status().get(0).error()).contains("replication slot " + slot + " does not exist")
          .contains("history lost");
      assertThat(gaps).containsExactly("stopped");
      stopping.close();
      assertThat(feed.slot(PartitionSpec.single())).as("the resume did not create the slot again").isEmpty();

      gaps.clear();
      Listener<Map<String, Object>> skipping = listener(url, HistoryLostPolicy.SKIP_TO_LATEST, seen, gaps);
      await().atMost(Duration.ofSeconds(30)).until(() -> skipping.status().get(0).state() == PartitionState.ACTIVE
          && !gaps.isEmpty());
      assertThat(gaps).singleElement().asString().startsWith("resumed at ");
      assertThat(feed.slot(PartitionSpec.single())).as("the policy's new start created it").isPresent();
      sql(ds, "INSERT INTO orders VALUES (100, 100)");
      await().atMost(Duration.ofSeconds(30)).until(() -> seen.contains(100));
      assertThat(seen).as("the rows written while no slot existed are the recorded gap")
          .containsExactly(0, 1, 2, 3, 4, 100);
      skipping.close();
    }
  }

  private static PostgresChangeFeed feed(String url) {
    return PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build();
  }

  private Listener<Map<String, Object>> listener(String url, HistoryLostPolicy policy, List<Integer> seen,
      List<String> gaps) {
    return Listener.builder(feed(url), SqlLeaseStore.builder(simple(url)).build())
        .group("g")
        .owner("a")
        .partitions(1)
        .leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofSeconds(1))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .onHistoryLost(policy)
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
        .observer(new ListenerObserver() {
          @Override
          public void historyLost(String lease, HistoryLostException error, Position resumedAt) {
            gaps.add(resumedAt == null ? "stopped" : "resumed at " + resumedAt.token());
          }
        })
        .handler((change, fence) -> {
          seen.add((Integer) change.document().get("n"));
          lastPosition.set(change.position());
        })
        .build()
        .start();
  }

  /** Writes about {@code megabytes} MB of WAL, switches segment and checkpoints (which invalidates slots). */
  private static void writeWal(DataSource ds, int megabytes) throws SQLException {
    sql(ds, "INSERT INTO filler (pad) SELECT repeat(md5(g::text), 30) FROM generate_series(1, " + megabytes * 1000 + ") g",
        "SELECT pg_switch_wal()", "CHECKPOINT");
  }

  private static double gauge(SimpleMeterRegistry registry, String name) {
    return registry.get(name).gauge().value();
  }

}
