package dev.sluice.benchmarks.lock;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lock.LockProvider;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.shedlock.SluiceShedLockProvider;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.provider.jdbctemplate.JdbcTemplateLockProvider;
import net.javacrumbs.shedlock.provider.mongo.MongoLockProvider;

/**
 * Plain main-based harness (not JMH: each measurement needs three embedded servers and both
 * libraries in one process, and the figures are milliseconds of I/O, not nanoseconds of CPU).
 * Per backend, on the same server and the same connection pool / client:
 *
 * <ul>
 *   <li>uncontended: one thread, acquire + release of one name, 1,500 timed iterations after 300
 *       warm-up ones; median and p99;
 *   <li>contended: {@value #THREADS} threads try-acquire + release one name for 4 s; successful
 *       acquisitions per second.
 * </ul>
 *
 * <p>Arguments (all optional, the defaults are the published run): warm-up iterations, timed
 * iterations, contended milliseconds; the build's smoke run passes tiny ones.
 *
 * Each measurement runs twice, in the order Sluice, ShedLock and then ShedLock, Sluice, to even
 * out drift on a shared machine; the samples of both rounds are pooled.
 */
public final class LockBenchmark {
  private static int warmup = 300;
  private static int iterations = 1500;
  static final int THREADS = 8;
  private static int contendedMillis = 4000;
  private static final Duration AT_MOST = Duration.ofSeconds(30);

  /** One library's lock on one backend, reduced to what is measured. */
  interface Contender {
    String label();

    /** Acquire; empty if held elsewhere. The returned action releases. */
    Optional<Runnable> tryLock(String name);
  }

  record Result(String backend, String library, double medianMs, double p99Ms, double perSecond,
      double attemptsPerSecond) {}

  public static void main(String[] args) throws Exception {
    warmup = args.length > 0 ? Integer.parseInt(args[0]) : warmup;
    iterations = args.length > 1 ? Integer.parseInt(args[1]) : iterations;
    contendedMillis = args.length > 2 ? Integer.parseInt(args[2]) : contendedMillis;
    List<Result> results = new ArrayList<>();
    String version = System.getProperty("java.version");

    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      MongoDatabase db = client.getDatabase("bench");
      LockProvider sluice = LockProvider.on(MongoLeaseStore.builder(db).collection("sluice_leases")
          .build()).leaseDuration(AT_MOST).build();
      MongoLockProvider shed = new MongoLockProvider(db);
      results.addAll(compare("MongoDB (mongo-java-server 1.47)", sluice(sluice),
          adapter(sluice), shedlock(shed, "ShedLock")));
      sluice.close();
    }

    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      results.addAll(compareSql("PostgreSQL 17", pg.dataSource("bench"), "CREATE TABLE IF NOT EXISTS shedlock("
          + "name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, "
          + "locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"));
    }

    try (EmbeddedMariaDb maria = EmbeddedMariaDb.start()) {
      results.addAll(compareSql("MariaDB 11.4", maria.dataSource("bench"), "CREATE TABLE IF NOT EXISTS shedlock("
          + "name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL DEFAULT "
          + "CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"));
    }

    String table = table(results, version);
    System.out.println(table);
    Path out = Path.of("target", "lock-benchmark.md");
    try {
      Files.createDirectories(out.getParent());
      Files.writeString(out, table);
    } catch (IOException e) {
      System.err.println("Could not write " + out + ": " + e);
    }
    System.exit(0);
  }

  /** Sluice and ShedLock on {@code ds}, after {@code shedlockTable} (the DDL of ShedLock's table there). */
  private static List<Result> compareSql(String backend, DataSource ds, String shedlockTable)
      throws InterruptedException, SQLException {
    execute(ds, shedlockTable);
    LeaseStore store = SqlLeaseStore.builder(ds).table("sluice_lease").build();
    LockProvider sluice = LockProvider.on(store).leaseDuration(AT_MOST).build();
    // usingDbTime(): like Sluice, judge expiry on the database's clock.
    JdbcTemplateLockProvider shed = new JdbcTemplateLockProvider(JdbcTemplateLockProvider
        .Configuration.builder().withJdbcTemplate(new org.springframework.jdbc.core.JdbcTemplate(ds))
        .usingDbTime().build());
    try {
      return compare(backend, sluice(sluice), adapter(sluice), shedlock(shed, "ShedLock"));
    } finally {
      sluice.close();
    }
  }

  private static Contender sluice(LockProvider p) {
    return new Contender() {
      @Override
      public String label() {
        return "Sluice";
      }

      @Override
      public Optional<Runnable> tryLock(String name) {
        return p.tryAcquire(name).map(l -> l::close);
      }
    };
  }

  /** Sluice's timed locks through ShedLock's API: what a ShedLock user gets by switching. */
  private static Contender adapter(LockProvider p) {
    return shedlock(SluiceShedLockProvider.of(p), "Sluice via ShedLock API");
  }

  private static Contender shedlock(net.javacrumbs.shedlock.core.LockProvider p, String label) {
    return new Contender() {
      @Override
      public String label() {
        return label;
      }

      @Override
      public Optional<Runnable> tryLock(String name) {
        Optional<SimpleLock> l =
            p.lock(new LockConfiguration(Instant.now(), name, AT_MOST, Duration.ZERO));
        return l.map(s -> s::unlock);
      }
    };
  }

  /**
   * Measures every contender on one backend; the first is Sluice, the last ShedLock. Round 1 runs
   * them in the given order, round 2 in reverse.
   */
  private static List<Result> compare(String backend, Contender... contenders)
      throws InterruptedException {
    int n = contenders.length;
    long[][] latency = new long[n][];
    double[][] rates = new double[n][2];
    for (int round = 0; round < 2; round++) {
      for (int k = 0; k < n; k++) {
        int i = round == 0 ? k : n - 1 - k;
        Contender c = contenders[i];
        long[] samples = uncontended(c, "uc-" + i + "-" + round);
        latency[i] = latency[i] == null ? samples : concat(latency[i], samples);
        double[] r = contended(c, "ct-" + i + "-" + round);
        rates[i][0] += r[0] / 2;
        rates[i][1] += r[1] / 2;
        System.out.printf(Locale.ROOT, "%s %s round %d: median %.3f ms, %.0f acq/s%n", backend,
            c.label(), round, median(samples) / 1e6, r[0]);
      }
    }
    List<Result> results = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      results.add(new Result(backend, contenders[i].label(), median(latency[i]) / 1e6,
          p99(latency[i]) / 1e6, rates[i][0], rates[i][1]));
    }
    return results;
  }

  private static long[] uncontended(Contender c, String name) {
    for (int i = 0; i < warmup; i++) {
      c.tryLock(name).orElseThrow(() -> new IllegalStateException("uncontended lock not granted"))
          .run();
    }
    long[] samples = new long[iterations];
    for (int i = 0; i < iterations; i++) {
      long start = System.nanoTime();
      c.tryLock(name).orElseThrow(() -> new IllegalStateException("uncontended lock not granted"))
          .run();
      samples[i] = System.nanoTime() - start;
    }
    return samples;
  }

  /** Returns {successful acquisitions per second, attempts per second}. */
  private static double[] contended(Contender c, String name) throws InterruptedException {
    AtomicLong acquired = new AtomicLong();
    AtomicLong attempts = new AtomicLong();
    AtomicLong errors = new AtomicLong();
    CountDownLatch start = new CountDownLatch(1);
    long[] window = new long[2];
    List<Thread> threads = new ArrayList<>();
    for (int t = 0; t < THREADS; t++) {
      Thread thread = new Thread(() -> {
        try {
          start.await();
        } catch (InterruptedException e) {
          return;
        }
        while (System.nanoTime() < window[1]) {
          try {
            Optional<Runnable> lock = c.tryLock(name);
            attempts.incrementAndGet();
            if (lock.isPresent()) {
              acquired.incrementAndGet();
              lock.get().run();
            }
          } catch (RuntimeException e) {
            errors.incrementAndGet();
          }
        }
      });
      threads.add(thread);
      thread.start();
    }
    window[0] = System.nanoTime();
    window[1] = window[0] + Duration.ofMillis(contendedMillis).toNanos();
    start.countDown();
    for (Thread t : threads) {
      t.join();
    }
    double seconds = (System.nanoTime() - window[0]) / 1e9;
    if (errors.get() > 0) {
      System.out.printf("%s: %d errors under contention%n", c.label(), errors.get());
    }
    return new double[] {acquired.get() / seconds, attempts.get() / seconds};
  }

  private static void execute(DataSource ds, String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  private static long[] concat(long[] a, long[] b) {
    long[] r = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  private static double median(long[] samples) {
    long[] s = samples.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }

  private static double p99(long[] samples) {
    long[] s = samples.clone();
    Arrays.sort(s);
    return s[(int) Math.min(s.length - 1, Math.round(s.length * 0.99))];
  }

  private static String table(List<Result> results, String javaVersion) {
    StringBuilder b = new StringBuilder();
    b.append(String.format(Locale.ROOT, "Java %s, %d cores; %d x acquire+release uncontended, "
        + "%d threads x %s s contended (pooled over 2 rounds)%n%n", javaVersion,
        Runtime.getRuntime().availableProcessors(), 2 * iterations, THREADS, contendedMillis / 1000.0));
    b.append("| backend | library | uncontended median (ms) | p99 (ms) | contended acquisitions/s "
        + "(8 threads) | attempts/s | latency / ShedLock | throughput / ShedLock |\n");
    b.append("|---|---|---|---|---|---|---|---|\n");
    for (Result r : results) {
      Result h = results.stream()
          .filter(x -> x.backend().equals(r.backend()) && x.library().equals("ShedLock"))
          .findFirst().orElseThrow();
      b.append(String.format(Locale.ROOT, "| %s | %s | %.3f | %.3f | %.0f | %.0f | %s | %s |%n",
          r.backend(), r.library(), r.medianMs(), r.p99Ms(), r.perSecond(), r.attemptsPerSecond(),
          r == h ? "" : String.format(Locale.ROOT, "%.2f", r.medianMs() / h.medianMs()),
          r == h ? "" : String.format(Locale.ROOT, "%.2f", r.perSecond() / h.perSecond())));
    }
    return b.toString();
  }
}
