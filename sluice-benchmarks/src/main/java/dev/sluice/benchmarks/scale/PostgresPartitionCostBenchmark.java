package dev.sluice.benchmarks.scale;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import dev.sluice.testkit.sql.Jdbc;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.postgresql.replication.PGReplicationStream;

/**
 * Issue 33 section 3 item 3: what a partition costs on PostgreSQL. Each partition of a stream reads
 * through a slot of its own, and each slot's walsender decodes the whole WAL and, with one shared
 * publication, sends every row of it; the partition's cursor then converts only the rows whose key
 * it owns. For 1, 2, 4 and 8 partitions of one stream, all reading the same backlog of {@code rows}
 * inserted rows (transactions of 1,000) at once, one reader thread per partition:
 *
 * <ul>
 *   <li><b>shared publication</b> (what Sluice does): partition i of N is {@code PartitionSpec(i,
 *       N)} over publication {@code pub};
 *   <li><b>a row-filtered publication per partition</b> (PostgreSQL 15+): partition i of N reads
 *       publication {@code p<N>_<i>} = {@code FOR TABLE t WHERE (id % N = i)} with
 *       {@code PartitionSpec.single()}, so it keeps every row the server sends. This is NOT Sluice's
 *       key assignment (CRC32C of the key's text, which no built-in SQL function of PostgreSQL 17
 *       computes): it splits the keys as evenly, so it measures what the server saves.
 * </ul>
 *
 * Figures per variant: the walsenders' CPU (utime + stime from {@code /proc/<pid>/stat} of each
 * slot's {@code active_pid}, read after every reader has its rows and before any disconnects),
 * the bytes the walsenders sent (their TCP sockets' {@code bytes_sent}, from {@code ss -tinp}; one
 * raw read of the shared publication compares it with the bytes pgjdbc hands the client),
 * the client's wall time (start of all readers to the last one's last row), and the client
 * process's CPU over the same span. The server runs on this machine, so the figures share 2 cores.
 * With more than one round the first is a warm-up (JIT), not counted.
 *
 * <pre>java -cp ... dev.sluice.benchmarks.scale.PostgresPartitionCostBenchmark [rows] [rounds]</pre>
 */
public final class PostgresPartitionCostBenchmark {
  private static final int CHUNK = 1000;
  private static final int[] COUNTS = {1, 2, 4, 8};
  private static final long TICKS_PER_SECOND = 100; // getconf CLK_TCK on Linux

  private PostgresPartitionCostBenchmark() {}

  record Result(double wallSeconds, double clientCpuSeconds, double serverCpuSeconds, long serverBytes,
      long rowsDelivered) {}

  public static void main(String[] args) throws Exception {
    int rows = args.length > 0 ? Integer.parseInt(args[0]) : 100_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("parts");
      String url = pg.jdbcUrl(db);
      List<String> setup = new ArrayList<>(List.of(
          "CREATE TABLE t (id bigint PRIMARY KEY, n int, amount numeric(12,2), note text)",
          "CREATE PUBLICATION pub FOR TABLE t"));
      for (int n : COUNTS) {
        for (int i = 0; i < n; i++) {
          setup.add("CREATE PUBLICATION p" + n + "_" + i + " FOR TABLE t WHERE (id % " + n + " = " + i + ")");
        }
      }
      Jdbc.execute(url, setup);
      System.out.printf("PostgreSQL %s; crc32c() in SQL: %s%n", Jdbc.queryOne(url, "SHOW server_version"),
          Jdbc.queryOne(url, "SELECT coalesce(to_regproc('crc32c')::text, 'none')"));
      // Which hash expressions a row filter takes (only immutable built-in functions are allowed).
      for (String filter : List.of("(hashint8(id) & 7) = 0", "(hashtext(id::text) & 7) = 0",
          "(hashtext(note) & 7) = 0")) {
        try {
          Jdbc.execute(url, "CREATE PUBLICATION probe FOR TABLE t WHERE (" + filter + ")", "DROP PUBLICATION probe");
          System.out.printf("row filter WHERE (%s): accepted%n", filter);
        } catch (SQLException e) {
          System.out.printf("row filter WHERE (%s): refused: %s%n", filter, e.getMessage().replace('\n', ' '));
        }
      }
      Map<String, List<Result>> results = new LinkedHashMap<>();
      long nextId = 0;
      for (int round = 0; round < rounds; round++) {
        // Every slot first, then the backlog: every variant reads the same rows.
        Map<String, List<PostgresChangeFeed>> feeds = new LinkedHashMap<>();
        for (int n : COUNTS) {
          PostgresChangeFeed shared = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub")
              .table("public.t").stream("shared" + n + "r" + round).build();
          List<PostgresChangeFeed> filtered = new ArrayList<>();
          for (int i = 0; i < n; i++) {
            shared.open(new PartitionSpec(i, n), StartPoint.latest()).close();
            PostgresChangeFeed f = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null,
                "p" + n + "_" + i).table("public.t").stream("filtered" + n + "_" + i + "r" + round).build();
            f.open(PartitionSpec.single(), StartPoint.latest()).close();
            filtered.add(f);
          }
          feeds.put("shared" + n, List.of(shared));
          feeds.put("filtered" + n, filtered);
        }
        String raw = "raw_r" + round;
        Jdbc.execute(url, "SELECT pg_create_logical_replication_slot('" + raw + "', 'pgoutput')");
        insert(url, nextId, rows);
        nextId += rows;

        long[] wire = rawRead(url, raw, rows);
        System.out.printf("round %d: raw read of the shared publication: %,d bytes of pgoutput messages to the"
            + " client (%,d messages), walsender sent %,d bytes (its socket), CPU %.2f s%n", round + 1, wire[0],
            wire[1], wire[2], wire[3] / (double) TICKS_PER_SECOND);

        for (int k = 0; k < COUNTS.length; k++) {
          int n = COUNTS[k];
          List<String> order = k % 2 == 0 ? List.of("shared", "filtered") : List.of("filtered", "shared");
          for (String kind : order) {
            Result r = kind.equals("shared")
                ? run(url, n, feeds.get("shared" + n).get(0), null, rows)
                : run(url, n, null, feeds.get("filtered" + n), rows);
            if (round > 0 || rounds == 1) {
              results.computeIfAbsent(kind + "/" + n, x -> new ArrayList<>()).add(r);
            }
            System.out.printf("  round %d %-8s %d partitions: wall %6.2f s, client CPU %6.2f s, walsenders CPU %6.2f"
                + " s, walsenders sent %,13d bytes, rows delivered %,d%n", round + 1, kind, n, r.wallSeconds(),
                r.clientCpuSeconds(), r.serverCpuSeconds(), r.serverBytes(), r.rowsDelivered());
          }
        }
        Jdbc.execute(url, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active");
      }
      System.out.printf("%nBacklog of %,d rows, %d round(s)%s; ratios to 1 partition of the shared publication in"
          + " the same round (median of rounds)%n", rows, rounds, rounds > 1 ? ", the first a warm-up not counted" : "");
      System.out.println("| partitions | publication | walsenders CPU | ratio | walsenders sent | ratio"
          + " | client wall time | ratio | client CPU | ratio |");
      System.out.println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
      for (int n : COUNTS) {
        for (String kind : List.of("shared", "filtered")) {
          List<Result> rs = results.get(kind + "/" + n);
          List<Result> base = results.get("shared/1");
          System.out.printf("| %d | %s | %.2f s | %.2f | %,.1f MB | %.2f | %.2f s | %.2f | %.2f s | %.2f |%n", n,
              kind.equals("shared") ? "shared" : "row filter per partition",
              median(rs, Result::serverCpuSeconds), ratio(rs, base, Result::serverCpuSeconds),
              median(rs, r -> r.serverBytes() / 1e6), ratio(rs, base, r -> (double) r.serverBytes()),
              median(rs, Result::wallSeconds), ratio(rs, base, Result::wallSeconds),
              median(rs, Result::clientCpuSeconds), ratio(rs, base, Result::clientCpuSeconds));
        }
      }
    }
    System.exit(0);
  }

  interface Metric {
    double of(Result r);
  }

  private static double median(List<Result> rs, Metric m) {
    List<Double> v = new ArrayList<>();
    rs.forEach(r -> v.add(m.of(r)));
    v.sort(null);
    return v.get(v.size() / 2);
  }

  /** The median over rounds of the in-round ratio. */
  private static double ratio(List<Result> rs, List<Result> base, Metric m) {
    List<Double> v = new ArrayList<>();
    for (int i = 0; i < rs.size(); i++) {
      v.add(m.of(rs.get(i)) / m.of(base.get(i)));
    }
    v.sort(null);
    return v.get(v.size() / 2);
  }

  /**
   * N readers at once: partition i of {@code shared}, or {@code filtered.get(i)} as a single
   * partition, until together they delivered the backlog; more than the backlog fails the run.
   */
  private static Result run(String url, int n, PostgresChangeFeed shared, List<PostgresChangeFeed> filtered,
      int rows) throws Exception {
    CountDownLatch read = new CountDownLatch(n);
    CountDownLatch measured = new CountDownLatch(1);
    AtomicLong delivered = new AtomicLong();
    List<String> slots = new ArrayList<>();
    List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Thread> threads = new ArrayList<>();
    var os = (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    System.gc();
    long cpu0 = os.getProcessCpuTime();
    long start = System.nanoTime();
    AtomicLong end = new AtomicLong();
    for (int i = 0; i < n; i++) {
      PartitionSpec spec = shared != null ? new PartitionSpec(i, n) : PartitionSpec.single();
      PostgresChangeFeed feed = shared != null ? shared : filtered.get(i);
      slots.add(feed.slotName(spec));
      Thread t = new Thread(() -> {
        try (FeedCursor<Map<String, Object>> c = feed.open(spec, StartPoint.oldest())) {
          // Each row is delivered to exactly one partition: the readers are done when their rows add
          // up to the backlog (which partition keeps a row is the feed's business: its key's hash).
          while (delivered.get() < rows) {
            List<ChangeEvent<Map<String, Object>>> batch = c.poll(Duration.ofMillis(20));
            long docs = batch.stream().filter(e -> e.document() != null).count();
            if (docs > 0 && delivered.addAndGet(docs) >= rows) {
              end.set(System.nanoTime());
            }
          }
          read.countDown();
          measured.await(); // the walsender is measured while its reader is still connected
        } catch (Throwable e) {
          failures.add(e);
          read.countDown();
        }
      }, "reader-" + i);
      threads.add(t);
      t.start();
    }
    read.await();
    long cpu1 = os.getProcessCpuTime();
    if (!failures.isEmpty()) {
      measured.countDown();
      throw new IllegalStateException("a reader failed", failures.get(0));
    }
    if (delivered.get() != rows) {
      measured.countDown();
      throw new IllegalStateException(delivered.get() + " rows delivered for a backlog of " + rows);
    }
    long ticks = 0;
    long bytes = 0;
    for (String slot : slots) {
      long pid = Long.parseLong(Jdbc.queryOne(url, "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '"
          + slot + "'"));
      long[] w = walsender(pid);
      ticks += w[0];
      bytes += w[1];
    }
    measured.countDown();
    for (Thread t : threads) {
      t.join();
    }
    return new Result((end.get() - start) / 1e9, (cpu1 - cpu0) / 1e9, ticks / (double) TICKS_PER_SECOND, bytes,
        delivered.get());
  }

  /**
   * utime + stime (clock ticks) of a server process, from {@code /proc/<pid>/stat}, and the bytes its
   * TCP sockets sent ({@code bytes_sent} of {@code ss -tinp}, the kernel's {@code tcp_info}): a
   * walsender's writes go through {@code send()}, which {@code wchar} of {@code /proc/<pid>/io}
   * does not count.
   */
  private static long[] walsender(long pid) throws Exception {
    String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    long ticks = Long.parseLong(f[11]) + Long.parseLong(f[12]); // fields 14 and 15
    Process ss = new ProcessBuilder("ss", "-tinpH").redirectErrorStream(true).start();
    List<String> lines = new String(ss.getInputStream().readAllBytes()).lines().toList();
    ss.waitFor();
    long sent = 0;
    boolean ours = false;
    for (String line : lines) {
      if (!Character.isWhitespace(line.charAt(0))) {
        ours = line.contains("pid=" + pid + ",");
      } else if (ours) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("bytes_sent:(\\d+)").matcher(line);
        if (m.find()) {
          sent += Long.parseLong(m.group(1));
        }
      }
    }
    return new long[] {ticks, sent};
  }

  /**
   * The shared publication read raw through pgjdbc: bytes and count of the pgoutput messages the
   * client receives, and the bytes the walsender sent and its CPU ticks at the end.
   */
  private static long[] rawRead(String url, String slot, int rows) throws Exception {
    try (Connection c = Jdbc.replicationConnection(url)) {
      PGReplicationStream stream = Jdbc.pgoutput(c, slot, "pub");
      long bytes = 0;
      long messages = 0;
      int inserts = 0;
      while (inserts < rows) {
        ByteBuffer m = stream.read();
        bytes += m.remaining();
        messages++;
        if (m.get(m.position()) == (byte) 'I') {
          inserts++;
        }
      }
      long[] w = walsender(Long.parseLong(Jdbc.queryOne(url,
          "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '" + slot + "'")));
      stream.close();
      return new long[] {bytes, messages, w[1], w[0]};
    }
  }



  private static void insert(String url, long from, int rows) throws SQLException {
    try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
      for (long at = from; at < from + rows; at += CHUNK) {
        s.execute("INSERT INTO t SELECT g, g % 1000, (g % 100000) / 100.0, 'a note of some length, row ' || g"
            + " FROM generate_series(" + at + ", " + (Math.min(at + CHUNK, from + rows) - 1) + ") g");
      }
    }
  }
}
