package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.PartitionSpec;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 33 defect 6: {@code sluice slots} lists the slots Sluice made with their group, partition,
 * retained WAL, whether a reader holds them and whether a live lease uses them; {@code --drop}
 * asks, and then drops only the slots of no live lease (here the old 2-partition layout of a
 * group), never the slot a running listener holds.
 */
class SlotsCommandTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();

  @TempDir Path dir;
  private final String db = PG.createDatabase("slotscli" + DATABASES.incrementAndGet());
  private final List<Listener<?>> running = new ArrayList<>();

  @AfterEach
  void stop() {
    running.forEach(Listener::close);
    PG.dropReplicationSlots(db);
  }

  private void sql(String... statements) throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private List<String> slots() throws Exception {
    List<String> out = new ArrayList<>();
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT slot_name FROM pg_replication_slots WHERE database = current_database()"
            + " ORDER BY slot_name")) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }

  private Listener<Map<String, Object>> listener(String group, int partitions) {
    Listener<Map<String, Object>> l = unstarted(group, partitions).start();
    running.add(l);
    await().atMost(Duration.ofSeconds(30)).until(() -> l.status().size() == partitions
        && l.status().stream().allMatch(s -> s.state() == PartitionState.ACTIVE && s.committed() != null));
    return l;
  }

  private Listener<Map<String, Object>> unstarted(String group, int partitions) {
    DataSource ds = PG.dataSource(db);
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.orders").build();
    return Listener.builder(feed,
            SqlLeaseStore.builder(ds).table(dev.sluice.postgres.source.PostgresBackend.DEFAULT_LEASE_TABLE).build())
        .group(group)
        .owner("tester")
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(3))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
        .handler((change, fence) -> { })
        .build();
  }

  @Test
  void listsTheSlotsWithGroupPartitionWalAndLeaseAndDropsOnlyThoseNoLiveLeaseUsesAfterAsking() throws Exception {
    sql("CREATE TABLE public.orders (id int PRIMARY KEY, pad text)", "CREATE PUBLICATION pub FOR TABLE public.orders");
    PostgresChangeFeed names = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.orders").build();
    String old0 = names.forGroup("indexer").slotName(new PartitionSpec(0, 2));
    String old1 = names.forGroup("indexer").slotName(new PartitionSpec(1, 2));
    String current = names.forGroup("relay").slotName(PartitionSpec.single());

    // Group "indexer" ran with two partitions and stopped (its records keep their checkpoints);
    // group "relay" runs now.
    Listener<Map<String, Object>> old = listener("indexer", 2);
    old.close();
    running.remove(old);
    listener("relay", 1);
    sql("INSERT INTO public.orders SELECT g, repeat('x', 1000) FROM generate_series(1, 2000) g");

    Path file = dir.resolve("sluice.yaml");
    Files.writeString(file, """
        postgres:
          url: "%s"
          user: %s
          password: ""
          publication: pub
        listeners:
          - table: public.orders
            group: relay
            sink:
              kafka: { bootstrapServers: "localhost:9", topic: orders }
        """.formatted(PG.jdbcUrl(db), EmbeddedPostgresServer.USER));

    CliRun list = CliRun.sluice("slots", "--config", file.toString());
    assertThat(list.exit()).as(list.err()).isZero();
    assertThat(list.out()).contains("RETAINED WAL", "ACTIVE", "LEASE");
    assertThat(line(list.out(), old0)).contains("indexer", "public.orders", "0/2", " no ").doesNotContain("live");
    assertThat(line(list.out(), old1)).contains("indexer", "public.orders", "1/2", " no ").doesNotContain("live");
    assertThat(line(list.out(), current)).contains("relay", "public.orders", "0/1", " yes ", "live (tester)");
    assertThat(line(list.out(), old0)).as("the idle slot keeps the 2 MB written since").containsPattern(" [0-9]+ MiB ");

    // Asked, and answered no: nothing is dropped.
    CliRun refused = withInput("n\n", () -> CliRun.sluice("slots", "--config", file.toString(), "--drop"));
    assertThat(refused.exit()).as(refused.err()).isZero();
    assertThat(refused.out()).contains("Drop 2 slot(s) no live lease uses: " + old0 + ", " + old1)
        .contains("Drop them? [y/N]").contains("Nothing dropped.");
    assertThat(slots()).containsExactlyInAnyOrder(old0, old1, current);

    // --yes: the old layout's slots go; the running listener's slot stays, and it keeps reading.
    CliRun dropped = CliRun.sluice("slots", "--config", file.toString(), "--drop", "--yes");
    assertThat(dropped.exit()).as(dropped.out() + dropped.err()).isZero();
    assertThat(dropped.out()).contains("dropped " + old0).contains("dropped " + old1).doesNotContain("dropped " + current);
    assertThat(slots()).containsExactly(current);

    CliRun nothing = CliRun.sluice("slots", "--config", file.toString(), "--drop", "--yes");
    assertThat(nothing.out()).contains("No slot to drop");
  }

  /**
   * {@code /status} shows each slot of a listener with the WAL it keeps; a slot dropped while its
   * partition has a checkpoint is reported as history lost (and not created again by asking).
   */
  @Test
  void theStatusShowsEachSlotsRetainedWalAndADroppedSlotAsHistoryLost() throws Exception {
    sql("CREATE TABLE public.orders (id int PRIMARY KEY, pad text)", "CREATE PUBLICATION pub FOR TABLE public.orders");
    Listener<Map<String, Object>> l = listener("relay", 2);
    l.close();
    running.remove(l);
    String dropped = names().forGroup("relay").slotName(new PartitionSpec(1, 2));
    String kept = names().forGroup("relay").slotName(new PartitionSpec(0, 2));
    sql("SELECT pg_drop_replication_slot('" + dropped + "')");
    SluiceConfig.PostgresSection section = new SluiceConfig.PostgresSection(PG.jdbcUrl(db), EmbeddedPostgresServer.USER,
        null, "pub", null, null, null, null);
    try (PostgresSource source = new PostgresSource(section, List.of())) {
      Listener<Map<String, Object>> built = unstarted("relay", 2);
      running.add(built);
      List<Map<String, Object>> slots = source.slots(built, source.leaseStore(null).list(""));
      assertThat(slots).hasSize(2);
      assertThat(slots.get(0)).containsEntry("slot", kept).containsEntry("exists", true)
          .containsEntry("historyLost", false).containsKey("retainedBytes").containsKey("walStatus");
      assertThat(slots.get(1)).containsEntry("slot", dropped).containsEntry("exists", false)
          .containsEntry("historyLost", true);
      assertThat((String) slots.get(1).get("note")).contains("lost history");
    }
    assertThat(slots()).containsExactly(kept);
  }

  private PostgresChangeFeed names() {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.orders").build();
  }

  private static String line(String table, String slot) {
    return table.lines().filter(l -> l.startsWith(slot + " ")).findFirst()
        .orElseThrow(() -> new AssertionError("no row for " + slot + " in:\n" + table));
  }

  private static CliRun withInput(String input, java.util.function.Supplier<CliRun> run) {
    InputStream before = System.in;
    System.setIn(new ByteArrayInputStream(input.getBytes(StandardCharsets.UTF_8)));
    try {
      return run.get();
    } finally {
      System.setIn(before);
    }
  }
}
