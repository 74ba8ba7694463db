package dev.sluice.benchmarks.debezium;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import dev.sluice.testkit.sql.Jdbc;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import io.debezium.embedded.Connect;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;
import org.postgresql.ds.PGSimpleDataSource;
import org.postgresql.replication.PGReplicationStream;

/**
 * Issue 13's figures: reading a backlog of {@code rows} inserted rows (transactions of 1,000) from
 * a replication slot, on one real PostgreSQL 17 in this process, by
 *
 * <ol>
 *   <li>a raw read of the slot (pgjdbc's replication stream, pgoutput messages counted, nothing
 *       decoded): the baseline every other figure is a ratio to;
 *   <li>Sluice's PostgreSQL feed, polled in batches of 500 (decoded into changes);
 *   <li>Sluice's listener, a handler call per change, checkpoints every 1,000 changes to the SQL
 *       lease store on the same database;
 *   <li>Debezium's PostgreSQL connector in its embedded engine (pgoutput, Connect records, a batch
 *       consumer marking each record processed), the way a Debezium Server or Kafka Connect
 *       deployment reads before it serializes.
 * </ol>
 *
 * Each reader's slot is created before the rows are inserted, so every reader reads the same
 * backlog; each time runs from the reader's start (connection, slot, engine start-up included) to
 * its {@code rows}-th insert; each round starts with another reader. The median of {@code rounds}
 * is reported, with the time from the reader's start to its first change. Then the heap retained while Sluice's feed and Debezium read one transaction of
 * {@code bigRows} rows (heap in use after a forced full collection every 250 ms, the largest seen,
 * minus before).
 */
public final class PostgresFeedBenchmark {
  private static final int CHUNK = 1000;

  private PostgresFeedBenchmark() {}

  public static void main(String[] args) throws Exception {
    int rows = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 4;
    int bigRows = args.length > 2 ? Integer.parseInt(args[2]) : 1_000_000;
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("bench");
      String url = pg.jdbcUrl(db);
      Jdbc.execute(url, "CREATE TABLE bench (id bigint PRIMARY KEY, n int, amount numeric(12,2), note text)",
          "CREATE PUBLICATION pub FOR TABLE bench");
      Map<String, List<Double>> seconds = new java.util.TreeMap<>();
      long nextId = 0;
      for (int r = 0; r < rounds; r++) {
        int round = r;
        String raw = "raw_" + round;
        String dbz = "dbz_" + round;
        PostgresChangeFeed feed = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub")
            .table("public.bench").stream("feed_" + round).build();
        PostgresChangeFeed listened = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub")
            .table("public.bench").stream("listener_" + round).build();
        Jdbc.execute(url, "SELECT pg_create_logical_replication_slot('" + raw + "', 'pgoutput')",
            "SELECT pg_create_logical_replication_slot('" + dbz + "', 'pgoutput')");
        feed.open(PartitionSpec.single(), StartPoint.latest()).close();
        listened.forGroup("g" + round).open(PartitionSpec.single(), StartPoint.latest()).close();
        insert(url, nextId, rows);
        nextId += rows;

        Map<String, Run> readers = new java.util.LinkedHashMap<>();
        readers.put("raw slot read", () -> rawRead(url, raw, rows));
        readers.put("Sluice feed, batches of 500", () -> feedRead(feed, rows));
        readers.put("Sluice listener, a handler call per change", () -> listenerRead(url, listened, "g" + round, rows));
        readers.put("Debezium embedded engine", () -> debeziumRead(pg, db, dbz, rows, "public.bench"));
        // Each round starts with another reader: none always reads first (colder caches).
        List<String> order = new ArrayList<>(readers.keySet());
        Collections.rotate(order, -round);
        for (String name : order) {
          time(seconds, name, readers.get(name));
        }
        Jdbc.execute(url, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active");
        System.out.printf("round %d done%n", round + 1);
      }
      System.out.printf("%nBacklog of %,d rows (transactions of %,d), median of %d rounds:%n", rows, CHUNK, rounds);
      double base = median(seconds.get("raw slot read"));
      for (Map.Entry<String, List<Double>> e : seconds.entrySet()) {
        double s = median(e.getValue());
        System.out.printf("  %-46s %7.2f s  %,10.0f changes/s  time ratio to raw read %.2f%n", e.getKey(), s,
            rows / s, s / base);
      }
      double dbz = median(seconds.get("Debezium embedded engine"));
      System.out.printf("Throughput ratio to Debezium: feed %.2f, listener %.2f%n",
          dbz / median(seconds.get("Sluice feed, batches of 500")),
          dbz / median(seconds.get("Sluice listener, a handler call per change")));
      System.out.printf("%nTime to the first change after the reader starts, median:%n");
      for (Map.Entry<String, List<Double>> e : FIRST_MILLIS.entrySet()) {
        System.out.printf("  %-46s %7.0f ms%n", e.getKey(), median(e.getValue()));
      }

      // Memory: one transaction of bigRows rows.
      String bigRaw = "big_dbz";
      PostgresChangeFeed big = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub")
          .table("public.bench").stream("big").build();
      big.open(PartitionSpec.single(), StartPoint.latest()).close();
      PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.bench").stream("rss")
          .build().open(PartitionSpec.single(), StartPoint.latest()).close();
      Jdbc.execute(url, "SELECT pg_create_logical_replication_slot('" + bigRaw + "', 'pgoutput')",
          "SELECT pg_create_logical_replication_slot('rss_dbz', 'pgoutput')");
      Jdbc.execute(url, "INSERT INTO bench SELECT g, g % 1000, (g % 100000) / 100.0, 'a note of some length, row ' || g"
          + " FROM generate_series(" + nextId + ", " + (nextId + bigRows - 1) + ") g");
      System.out.printf("%nOne transaction of %,d rows: heap retained by the reader (after forced full"
          + " collections):%n", bigRows);
      memory("Sluice feed", () -> feedRead(big, bigRows));
      memory("Debezium embedded engine", () -> debeziumRead(pg, db, bigRaw, bigRows, "public.bench"));
      System.out.printf("%nThe same transaction read by each in a JVM of its own (-Xmx128m, serial GC):"
          + " peak resident memory (VmHWM)%n");
      ReaderProcess.measure("Sluice feed", "feed", url, pg.port(), db, "rss", bigRows);
      ReaderProcess.measure("Debezium embedded engine", "debezium", url, pg.port(), db, "rss_dbz", bigRows);
    }
    System.exit(0);
  }

  /** When the reader being timed counted its first change (System.nanoTime), 0 before. */
  private static final AtomicLong FIRST = new AtomicLong();

  private static void counted(long count) {
    if (count == 1) {
      FIRST.compareAndSet(0, System.nanoTime());
    }
  }

  private static final Map<String, List<Double>> FIRST_MILLIS = new java.util.TreeMap<>();

  interface Run {
    void run() throws Exception;
  }

  private static void time(Map<String, List<Double>> out, String name, Run run) throws Exception {
    System.gc();
    FIRST.set(0);
    long start = System.nanoTime();
    run.run();
    double s = (System.nanoTime() - start) / 1e9;
    double first = (FIRST.get() - start) / 1e6;
    out.computeIfAbsent(name, k -> new ArrayList<>()).add(s);
    FIRST_MILLIS.computeIfAbsent(name, k -> new ArrayList<>()).add(first);
    System.out.printf("  %-46s %7.2f s, first change after %6.0f ms%n", name, s, first);
  }

  /**
   * Runs {@code run} while a sampler forces a full collection every 250 ms and keeps the largest
   * heap still in use after it: what the reader retains, not its garbage.
   */
  private static void memory(String name, Run run) throws Exception {
    var heap = ManagementFactory.getMemoryMXBean();
    System.gc();
    long before = heap.getHeapMemoryUsage().getUsed();
    AtomicLong peak = new AtomicLong(before);
    var sampler = Executors.newSingleThreadScheduledExecutor();
    sampler.scheduleWithFixedDelay(() -> {
      System.gc();
      peak.accumulateAndGet(heap.getHeapMemoryUsage().getUsed(), Math::max);
    }, 0, 250, TimeUnit.MILLISECONDS);
    run.run();
    sampler.shutdownNow();
    sampler.awaitTermination(10, TimeUnit.SECONDS);
    System.out.printf("  %-30s retained at most %,7.1f MB over the %,.1f MB in use before%n", name,
        (peak.get() - before) / 1048576.0, before / 1048576.0);
  }

  private static double median(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    return sorted.get(sorted.size() / 2);
  }

  private static void insert(String url, long from, int rows) throws SQLException {
    try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
      for (long at = from; at < from + rows; at += CHUNK) {
        long last = Math.min(at + CHUNK, from + rows) - 1; // exactly rows rows, also for a smoke run of fewer than CHUNK
        s.execute("INSERT INTO bench SELECT g, g % 1000, (g % 100000) / 100.0, 'a note of some length, row ' || g"
            + " FROM generate_series(" + at + ", " + last + ") g");
      }
    }
  }

  /** pgoutput messages read and counted ('I' = insert); nothing decoded beyond the first byte. */
  private static void rawRead(String url, String slot, int rows) throws SQLException {
    try (Connection c = Jdbc.replicationConnection(url)) {
      PGReplicationStream stream = Jdbc.pgoutput(c, slot, "pub");
      int inserts = 0;
      while (inserts < rows) {
        ByteBuffer m = stream.read();
        if (m.get(m.position()) == (byte) 'I') {
          counted(++inserts);
        }
      }
      stream.close();
    }
  }

  static void feedRead(PostgresChangeFeed feed, int rows) {
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.oldest())) {
      int seen = 0;
      while (seen < rows) {
        for (ChangeEvent<Map<String, Object>> e : c.poll(Duration.ofMillis(100))) {
          if (e.document() != null) {
            counted(++seen);
          }
        }
      }
    }
  }

  private static void listenerRead(String url, PostgresChangeFeed feed, String group, int rows) throws Exception {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setUrl(url);
    ds.setUser(EmbeddedPostgresServer.USER);
    AtomicLong seen = new AtomicLong();
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
    try (Listener<Map<String, Object>> l = Listener.builder(feed, SqlLeaseStore.builder(ds).build())
        .group(group)
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(1000, Duration.ofSeconds(1)))
        .handler((change, fence) -> {
          long n = seen.incrementAndGet();
          counted(n);
          if (n == rows) {
            done.countDown();
          }
        })
        .build()
        .start()) {
      if (!done.await(10, TimeUnit.MINUTES)) {
        throw new IllegalStateException("the listener read " + seen.get() + " of " + rows);
      }
    }
  }

  static void debeziumRead(EmbeddedPostgresServer pg, String db, String slot, int rows, String table)
      throws Exception {
    debeziumRead(pg.port(), db, slot, rows, table);
  }

  static void debeziumRead(int port, String db, String slot, int rows, String table) throws Exception {
    Properties p = DebeziumConfig.embedded("bench-" + slot, port, db, "bench", slot, "pub");
    p.setProperty("table.include.list", table);
    AtomicLong seen = new AtomicLong();
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
    ExecutorService executor = Executors.newSingleThreadExecutor();
    try (DebeziumEngine<RecordChangeEvent<SourceRecord>> engine =
        DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
            .using(p)
            .notifying((records, committer) -> {
              for (RecordChangeEvent<SourceRecord> r : records) {
                if (r.record().value() instanceof Struct s && "c".equals(s.getString("op"))) {
                  long n = seen.incrementAndGet();
                  counted(n);
                  if (n == rows) {
                    done.countDown();
                  }
                }
                committer.markProcessed(r);
              }
              committer.markBatchFinished();
            })
            .build()) {
      executor.execute(engine);
      if (!done.await(10, TimeUnit.MINUTES)) {
        throw new IllegalStateException("Debezium read " + seen.get() + " of " + rows);
      }
    } finally {
      executor.shutdown();
      executor.awaitTermination(1, TimeUnit.MINUTES);
    }
  }
}
