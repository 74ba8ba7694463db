package dev.sluice.benchmarks.debezium;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.testkit.process.ChildJvm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The Debezium side by side of docs/benchmarks.md, run as its documented command runs it (its main
 * class in a JVM of its own, on this module's class path) with tiny arguments; it checks that the
 * run ends normally and prints its result lines, and measures nothing (ADR 0117). Output in
 * {@code target/smoke/<main class>.log}.
 */
class DebeziumBenchmarkSmokeTest {
  /** C1 only: a smoke run is seconds long, the optimizing compiler would only take CPU from it. */
  private static final List<String> JVM = List.of("-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1");

  @Test
  void postgresFeedSideBySide() {
    // rows, rounds, rows of the one large transaction (read again by each reader in a JVM of its own)
    String out = run(PostgresFeedBenchmark.class, "300", "1", "300");
    assertThat(out).contains("Backlog of 300 rows").containsPattern("Throughput ratio to Debezium: feed \\d")
        .containsPattern("Debezium embedded engine +retained at most")
        .containsPattern("Debezium embedded engine .* peak resident .* MB");
  }

  /**
   * Connect against Connect: a broker JVM, a Connect 4.x worker JVM per variant, both connectors at
   * least once and exactly once (JSON without schemas), 200 rows, one round, no warm-up. The
   * broker's class path is {@code ../sluice-kafka39-broker/target/broker.classpath}, which the
   * reactor writes before this module (a dependency of it).
   */
  @Test
  void connectAgainstConnect() {
    // rows, warm-up rounds, rounds, with schemas too, 4 partitions too, Sluice batch.size (0: default), modes
    // The broker and the four workers with C1 only and the serial collector too: a third less CPU than their defaults.
    List<String> jvm = new ArrayList<>(JVM);
    jvm.add("-Dcac.worker.jvm=-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1");
    jvm.add("-Dcac.broker.jvm=-Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1");
    String out = run(ConnectAgainstConnectBenchmark.class, jvm, "200", "0", "1", "0", "0", "0", "both");
    assertThat(out).contains("rows=200, 1 measured rounds")
        .containsPattern("Sluice, at least once, JSON without schemas: throughput \\d")
        .containsPattern("Sluice, exactly once, JSON without schemas: throughput \\d")
        .containsPattern("worker RSS growth \\d").containsPattern("CPU seconds during the read: worker \\d");
  }

  @Test
  void typeCorpusThroughDebezium() {
    String out = run(DebeziumTypeCorpus.class);
    assertThat(out).contains("Debezium 3.6.1.Final, PostgreSQL connector (pgoutput)")
        .contains("Unchanged TOASTed column").containsPattern("OK +c_");
  }

  private static String run(Class<?> main, String... args) {
    return run(main, JVM, args);
  }

  private static String run(Class<?> main, List<String> options, String... args) {
    String name = main.getSimpleName();
    try (ChildJvm jvm = ChildJvm.start(name, options, main, args)) {
      int exit;
      try {
        exit = jvm.awaitExit(Duration.ofMinutes(5));
      } finally {
        // What the benchmark started and did not stop (it is killed on a timeout): only this run's own processes.
        ProcessHandle.of(jvm.pid()).ifPresent(p -> p.descendants().forEach(ProcessHandle::destroyForcibly));
        try {
          jvm.dumpOutput(Files.createDirectories(Path.of("target", "smoke")).resolve(name + ".log"));
        } catch (IOException e) {
          throw new IllegalStateException("cannot write target/smoke/" + name + ".log", e);
        }
      }
      String out = String.join("\n", jvm.output());
      assertThat(exit).as("exit code of %s; its output:%n%s", name, out).isZero();
      return out;
    }
  }
}
