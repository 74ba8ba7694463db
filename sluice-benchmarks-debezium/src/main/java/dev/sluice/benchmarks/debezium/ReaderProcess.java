package dev.sluice.benchmarks.debezium;

import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * One reader of {@link PostgresFeedBenchmark} in a JVM of its own, so that its resident memory is
 * its own: reads the given number of inserts from its slot, prints {@code DONE <ms>}, and waits to
 * be stopped while the parent reads its peak resident set ({@code VmHWM} in /proc).
 *
 * <p>Arguments: {@code feed|debezium}, JDBC URL, port, database, stream or slot, rows.
 */
public final class ReaderProcess {
  private ReaderProcess() {}

  public static void main(String[] args) throws Exception {
    String kind = args[0];
    int rows = Integer.parseInt(args[5]);
    long start = System.nanoTime();
    if (kind.equals("feed")) {
      PostgresFeedBenchmark.feedRead(PostgresChangeFeed.builder(args[1], EmbeddedPostgresServer.USER, null, "pub")
          .table("public.bench").stream(args[4]).build(), rows);
    } else {
      PostgresFeedBenchmark.debeziumRead(Integer.parseInt(args[2]), args[3], args[4], rows, "public.bench");
    }
    System.out.println("DONE " + (System.nanoTime() - start) / 1_000_000);
    Thread.sleep(Long.MAX_VALUE); // the parent reads /proc and stops this JVM
  }

  /** Runs one reader in its own JVM and prints its time and peak resident memory. */
  static void measure(String name, String kind, String url, int port, String db, String streamOrSlot, int rows)
      throws IOException {
    try (ChildJvm child = ChildJvm.start(name, List.of("-Xmx128m", "-XX:+UseSerialGC"), ReaderProcess.class,
        kind, url, Integer.toString(port), db, streamOrSlot, Integer.toString(rows))) {
      String done = child.awaitLine(l -> l.startsWith("DONE "), Duration.ofMinutes(10));
      long peakKb = Files.readAllLines(Path.of("/proc", Long.toString(child.pid()), "status")).stream()
          .filter(l -> l.startsWith("VmHWM:")).map(l -> l.replaceAll("[^0-9]", "")).mapToLong(Long::parseLong)
          .findFirst().orElse(-1);
      System.out.printf("  %-30s %7.2f s  peak resident %,8.1f MB%n", name,
          Long.parseLong(done.substring(5).trim()) / 1000.0, peakKb / 1024.0);
    }
  }
}
