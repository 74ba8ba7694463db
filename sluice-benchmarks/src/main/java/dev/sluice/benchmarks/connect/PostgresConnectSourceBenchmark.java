package dev.sluice.benchmarks.connect;

import static org.awaitility.Awaitility.await;

import dev.sluice.benchmarks.Rounds;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The Kafka Connect source connector on a PostgreSQL publication against Sluice's own Kafka relay
 * of the same table, in one JVM with one embedded Kafka broker and one PostgreSQL 17 server (issue
 * 17). Each variant reads the same rows, inserted 100 per transaction into a fresh database's
 * table after the variant's replication slot exists, into a fresh 3-partition topic; the clock
 * starts when the relay's listener starts again or the connector's paused tasks are resumed, and
 * stops when a {@code read_committed} consumer has the last record. Variants: the relay (a
 * listener with {@link KafkaSink}, baseline), and the connector with 1 task on 1 partition and 4
 * tasks on 4 partitions (each partition a slot of its own, which reads the whole WAL), exactly once
 * off and on. The connector publishes the relay's envelope ({@code value.format=envelope}). A
 * figure is the median of the in-round ratios to the relay, with their range; warm-up rounds are
 * not counted. Each run is also timed from the first record received to the last, with the time to
 * the first record apart ({@link Timings}); {@code -Dsluice.bench.variants=0,1,5} runs the relay,
 * the one-task connector at least once and the relay with the checkpoint default before issue 36.
 *
 * <p>Arguments: rows (default 20,000), warm-up rounds (1), measured rounds (3). Results: {@code
 * docs/benchmarks.md}.
 */
public final class PostgresConnectSourceBenchmark {
  private PostgresConnectSourceBenchmark() {}

  /** {@link ConnectSourceBenchmark}'s variants, with the PostgreSQL relay as the baseline. */
  private static final String[] NAMES = names();
  private static final int[] TASKS = ConnectSourceBenchmark.TASKS;
  private static final boolean[] EXACTLY_ONCE = ConnectSourceBenchmark.EXACTLY_ONCE;
  private static final int ALL = ConnectSourceBenchmark.ALL;

  private static String[] names() {
    String[] n = ConnectSourceBenchmark.NAMES.clone();
    n[0] = "Sluice Kafka relay on PostgreSQL (baseline)";
    n[5] = "Sluice Kafka relay on PostgreSQL, checkpoint every 100 changes (the default before issue 36)";
    return n;
  }

  public static void main(String[] args) throws Exception {
    int rows = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    System.out.printf("%d cores; rows=%d, %d warm-up + %d measured rounds%n", Runtime.getRuntime().availableProcessors(),
        rows, warmup, rounds);
    int[] selected = Timings.selected(ALL);
    String[] names = Timings.names(NAMES, selected);
    Timings timings = new Timings(names, warmup);
    Rounds result;
    try (EmbeddedKafka kafka = EmbeddedKafka.start(); EmbeddedPostgresServer pg = EmbeddedPostgresServer.start();
        ConnectWorkers alo = ConnectWorkers.start(kafka.bootstrapServers(), "pgbench-alo", false, 0);
        ConnectWorkers eos = ConnectWorkers.start(kafka.bootstrapServers(), "pgbench-eos", true, 0)) {
      result = Rounds.run(names, warmup, rounds, (r, i) -> {
        int v = selected[i];
        String tag = "r" + r + "v" + v;
        String db = pg.createDatabase("bench_" + tag.toLowerCase());
        prepare(pg.dataSource(db));
        Timings.Run run = TASKS[v] == 0 ? relay(kafka, pg, db, rows, tag, ConnectSourceBenchmark.relayPolicy(v))
            : connector(kafka, pg, db, EXACTLY_ONCE[v] ? eos : alo, TASKS[v], EXACTLY_ONCE[v], rows, tag);
        pg.dropReplicationSlots(db);
        return timings.add(r, i, run);
      });
    }
    System.out.printf("%nrows=%d, %d warm-up + %d measured rounds; median of in-round ratios to the relay [min-max]%n",
        rows, warmup, rounds);
    result.printRatiosToBaseline();
    if (selected.length == ALL && selected[ALL - 1] == ALL - 1) {
      result.printRatio("exactly once / at least once, 1 task", 3, 1);
      result.printRatio("exactly once / at least once, 4 tasks", 4, 2);
    }
    timings.print();
  }

  private static void prepare(DataSource db) throws SQLException {
    try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL, note text)");
      st.execute("CREATE PUBLICATION bench_pub FOR TABLE orders");
    }
  }

  /** {@code rows} inserts, 100 per transaction. */
  private static void insert(DataSource db, int rows) throws SQLException {
    try (Connection c = db.getConnection();
        PreparedStatement s = c.prepareStatement("INSERT INTO orders (id, amount, note) VALUES (?, ?, ?)")) {
      c.setAutoCommit(false);
      for (int i = 0; i < rows; i++) {
        s.setString(1, "o" + i);
        s.setInt(2, i);
        s.setString(3, "order number " + i + " of the benchmark");
        s.addBatch();
        if ((i + 1) % 100 == 0 || i == rows - 1) {
          s.executeBatch();
          c.commit();
        }
      }
    }
  }

  private static PostgresChangeFeed feed(EmbeddedPostgresServer pg, String db) {
    return PostgresChangeFeed.builder(pg.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "bench_pub")
        .table("public.orders").build();
  }

  /**
   * Changes per second through the relay: a first start creates the slot and pins its start, the
   * rows are written, and the clock runs from the second start to the last record received.
   */
  private static Timings.Run relay(EmbeddedKafka kafka, EmbeddedPostgresServer pg, String db, int rows, String tag,
      CheckpointPolicy policy)
      throws Exception {
    String topic = "pgrelay-" + tag;
    kafka.createTopic(topic, 3);
    DataSource ds = pg.dataSource(db);
    try (TopicWatch watch = new TopicWatch(kafka.bootstrapServers(), topic);
        KafkaSink<Map<String, Object>> sink = KafkaSink.builder(kafka.bootstrapServers(), topic,
            MessageEncoder.builder(PostgresDocuments.mapper()).build()).build()) {
      Listener.Builder<Map<String, Object>> listener = Listener.builder(feed(pg, db),
              SqlLeaseStore.builder(ds).dialect(SqlLeaseStore.Dialect.POSTGRESQL).build())
          .group("relay").checkpoint(policy).handler(sink);
      try (Listener<Map<String, Object>> first = listener.build().start()) {
        await().atMost(Duration.ofMinutes(1)).pollInterval(Duration.ofMillis(50))
            .until(() -> first.status().stream().allMatch(s -> s.state() == PartitionState.ACTIVE
                && s.committed() != null));
      }
      watch.awaitReady();
      insert(ds, rows);
      long start = System.nanoTime();
      try (WallProfile profile = WallProfile.relay("relay");
          Listener<Map<String, Object>> l = listener.build().start()) {
        long end = watch.awaitCount(rows, Duration.ofMinutes(10));
        return new Timings.Run(start, watch.receivedAt(1), end, rows, profile.split());
      }
    }
  }

  /**
   * Changes per second through the connector: created on the empty table (its slots pinned by a
   * heartbeat), paused, the rows written, and the clock run from the REST resume to the last
   * record received.
   */
  private static Timings.Run connector(EmbeddedKafka kafka, EmbeddedPostgresServer pg, String db, ConnectWorkers workers,
      int tasks, boolean exactlyOnce, int rows, String tag) throws Exception {
    String name = "pgbench-" + tag;
    String prefix = "pg-" + tag;
    String topic = prefix + "." + db + ".public.orders";
    kafka.createTopic(topic, 3);
    Map<String, String> c = ConnectWorkers.connectorBase(prefix, tasks, tasks, exactlyOnce);
    c.put("source.type", "postgresql");
    c.put("postgres.url", pg.jdbcUrl(db));
    c.put("postgres.publication", "bench_pub");
    c.put("postgres.tables", "public.orders");
    try (TopicWatch watch = new TopicWatch(kafka.bootstrapServers(), topic)) {
      workers.putConnector(name, c);
      watch.awaitReady();
      await().atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofMillis(50))
          .until(() -> workers.inState(name, "RUNNING", tasks)
              && workers.call("GET", "/connectors/" + name + "/offsets", null).path("offsets").size() == tasks);
      workers.call("PUT", "/connectors/" + name + "/pause", null);
      await().atMost(Duration.ofMinutes(1)).pollInterval(Duration.ofMillis(50))
          .until(() -> workers.inState(name, "PAUSED", tasks));
      insert(pg.dataSource(db), rows);
      long start = System.nanoTime();
      long end;
      String split;
      try (WallProfile profile = WallProfile.connectorTask()) {
        workers.call("PUT", "/connectors/" + name + "/resume", null);
        end = watch.awaitCount(rows, Duration.ofMinutes(10));
        split = profile.split();
      }
      long first = watch.receivedAt(1);
      workers.remove(name, Duration.ofMinutes(1));
      return new Timings.Run(start, first, end, rows, split);
    }
  }
}
