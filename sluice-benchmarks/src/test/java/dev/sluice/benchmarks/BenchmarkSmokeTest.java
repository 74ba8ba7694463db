package dev.sluice.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.benchmarks.chaos.ChaosSoak;
import dev.sluice.benchmarks.connect.ConnectSourceBenchmark;
import dev.sluice.benchmarks.connect.PostgresConnectSourceBenchmark;
import dev.sluice.benchmarks.listener.BacklogBenchmark;
import dev.sluice.benchmarks.listener.FailoverBenchmark;
import dev.sluice.benchmarks.listener.KeyedConcurrencyBenchmark;
import dev.sluice.benchmarks.listener.SnapshotBenchmark;
import dev.sluice.benchmarks.listener.ThroughputBenchmark;
import dev.sluice.benchmarks.lock.LockBenchmark;
import dev.sluice.benchmarks.scale.LeaseTrafficSimulation;
import dev.sluice.benchmarks.scale.PartitionReadCostBenchmark;
import dev.sluice.benchmarks.scale.PostgresPartitionCostBenchmark;
import dev.sluice.benchmarks.scale.RenewalCapacityBenchmark;
import dev.sluice.benchmarks.scale.ScaleOutBenchmark;
import dev.sluice.benchmarks.service.ServiceOpsBenchmark;
import dev.sluice.benchmarks.sink.KafkaRelayBenchmark;
import dev.sluice.benchmarks.sink.PostgresKafkaRelayBenchmark;
import dev.sluice.benchmarks.views.SequencedBenchmark;
import dev.sluice.benchmarks.views.ViewBenchmark;
import dev.sluice.testkit.process.ChildJvm;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;

/**
 * Every benchmark of docs/benchmarks.md, run as its documented command runs it (its main class in
 * a JVM of its own, on this module's class path) with tiny arguments: a few hundred changes, one
 * round, no warm-up. It checks that the run ends normally (exit code 0) and prints its result
 * line; it measures nothing (ADR 0117). A benchmark whose code no longer builds fails the build at
 * compile time; one that no longer runs fails here, so a published figure can be reproduced from
 * main with its command.
 *
 * <p>The runs are independent JVMs and run concurrently (junit-platform.properties); each starts
 * the embedded servers it needs, as the real run does. Their output is kept in
 * {@code target/smoke/<main class> <arguments>.log}. The runs tagged {@value #HEAVY} are not part of
 * the test command (see {@link #HEAVY}).
 */
@Execution(ExecutionMode.CONCURRENT)
class BenchmarkSmokeTest {
  /** C1 only: a smoke run is seconds long, the optimizing compiler would only take CPU from it. */
  private static final List<String> JVM = List.of("-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1");
  private static final Duration BOUND = Duration.ofMinutes(5);
  /**
   * The runs that start a Kafka broker, Connect workers, MariaDB or a member cluster: about a minute
   * of CPU each, more than the test command can take (ADR 0117). Left out of {@code mvn verify} by
   * this module's surefire configuration; {@code -Dbench.smoke.exclude=none} runs them too.
   */
  static final String HEAVY = "heavy";

  @Test
  void envelopeEncodingJmh() {
    // The documented command (org.openjdk.jmh.Main EnvelopeEncodingBenchmark) without a fork, one
    // 20 ms iteration per benchmark and parameter; -foe: an exception in a benchmark fails the run.
    String out = run("EnvelopeEncodingBenchmark", "org.openjdk.jmh.Main",
        "EnvelopeEncodingBenchmark", "-f", "0", "-wi", "0", "-i", "1", "-r", "20ms", "-foe", "true");
    assertThat(out).containsPattern("EnvelopeEncodingBenchmark\\.streamedEnvelope\\s+100\\s+avgt")
        .containsPattern("EnvelopeEncodingBenchmark\\.treeEnvelope\\s+10\\s+avgt")
        .containsPattern("EnvelopeEncodingBenchmark\\.bsonToJsonText\\s+10\\s+avgt");
  }

  @Test
  void leaseTrafficSimulation() {
    assertThat(run(LeaseTrafficSimulation.class, "5", "20", "1")).containsPattern("seed 1000: steady \\d+ writes/s");
  }

  @Test
  void sequenced() {
    assertThat(run(SequencedBenchmark.class, "200", "1")).contains("operations=200 (+10% duplicates)");
  }

  @Test
  void views() {
    assertThat(run(ViewBenchmark.class, "200", "1"))
        .containsPattern("round 1: no-op handler .* differences from the recomputed join: 0");
  }

  @Test
  void throughput() {
    assertThat(run(ThroughputBenchmark.class, "200", "1")).containsPattern("batched / per-change: +ratio");
  }

  @Test
  void keyedConcurrency() {
    assertThat(run(KeyedConcurrencyBenchmark.class, "10", "4", "2"))
        .contains("per-key order and exclusivity: checked in every round");
  }

  @Test
  void snapshot() {
    assertThat(run(SnapshotBenchmark.class, "300", "1"))
        .containsPattern("round 1: converged after forced history loss in .* \\(RESNAPSHOT, 300 documents\\)");
  }

  @Test
  void backlog() {
    assertThat(run(BacklogBenchmark.class, "300")).containsPattern("listener \\(-Xmx512m, serial GC\\): 300 changes in");
  }

  @Test
  void failoverWithLeasesInMongoDb() {
    // runs, lease store, partitions of the third variant, lease ms: 3 s instead of the default 10 s, so each of
    // the two SIGKILLs waits less for the dead holder's lease to expire
    assertThat(run(FailoverBenchmark.class, "1", "mongodb", "4", "3000"))
        .contains("failover after SIGKILL over 1 runs (lease 3 s, renew/acquire 1.00 s)")
        .contains("taken after the dead holder's expiry (store clock) over 1 runs")
        .contains("4 partitions, the last taken after its dead holder's expiry (store clock) over 1 runs")
        .contains("hand-over after SIGTERM over 1 runs");
  }

  @Test
  @Tag(HEAVY)
  void failoverWithLeasesInPostgres() {
    assertThat(run(FailoverBenchmark.class, "1", "postgresql")).contains("lease store: postgresql")
        .contains("hand-over after SIGTERM over 1 runs");
  }

  @Test
  @Tag(HEAVY)
  void failoverWithSessionLivenessInPostgres() {
    // runs, lease store, no partition variant, lease ms, session bound ms (ADR 0114)
    assertThat(run(FailoverBenchmark.class, "1", "postgresql-session", "0", "10000", "500"))
        .contains("lease store: postgresql-session (session bound 500 ms)")
        .contains("failover after SIGKILL over 1 runs (lease 10 s, renew/acquire 3.33 s)");
  }

  @Test
  @Tag(HEAVY)
  void chaosSoak() {
    // rounds, seed, changes per second, minutes at most
    assertThat(run(ChaosSoak.class, "2", "20261127", "16", "2")).contains("chaos soak, seed 20261127: every check held");
  }

  @Test
  void partitionReadCost() {
    // changes, rounds, checkpoint bound ms: 100 instead of 1 s, which each of the 16 runs of 200 changes would wait
    assertThat(run(PartitionReadCostBenchmark.class, "200", "1", "100"))
        .contains("changes=200, 1 measured rounds, checkpoint every 1000 changes or 100 ms")
        .contains("shared reader / cursor per partition");
  }

  @Test
  void renewalCapacity() {
    assertThat(run(RenewalCapacityBenchmark.class, "16", "1", "0,20")).containsPattern(
        "round trip +20 ms: all held after [0-9,]+ ms; in the next 1 s \\d+ leases lost");
  }

  @Test
  void scaleOut() {
    assertThat(run(ScaleOutBenchmark.class, "200", "1")).containsPattern("changes=200, .* 4 processes / 1");
  }

  @Test
  @Tag(HEAVY)
  void postgresPartitionCost() {
    assertThat(run(PostgresPartitionCostBenchmark.class, "200", "1")).contains("Backlog of 200 rows, 1 round(s)");
  }

  @Test
  @Tag(HEAVY)
  void kafkaRelay() {
    assertThat(run(KafkaRelayBenchmark.class, "200", "0", "1"))
        .contains("changes=200, 0 warm-up + 1 measured rounds").contains("default relay / listener without a sink");
  }

  @Test
  @Tag(HEAVY)
  void postgresKafkaRelay() {
    assertThat(run(PostgresKafkaRelayBenchmark.class, "200", "1")).contains("batched / per-change: ratio");
  }

  @Test
  @Tag(HEAVY)
  void connectSource() {
    // changes, warm-up rounds, measured rounds, kills per mode (none: a kill waits Connect's 10 s session timeout)
    assertThat(run(ConnectSourceBenchmark.class, "200", "0", "1", "0", "0"))
        .contains("exactly once / at least once, 4 tasks")
        .contains("new definition: from the first record received to the last").contains("thread: ");
  }

  @Test
  @Tag(HEAVY)
  void postgresConnectSource() {
    assertThat(run(PostgresConnectSourceBenchmark.class, "200", "0", "1"))
        .contains("exactly once / at least once, 4 tasks")
        .contains("new definition: from the first record received to the last").contains("thread: ");
  }

  @Test
  @Tag(HEAVY)
  void serviceOps() {
    assertThat(run(ServiceOpsBenchmark.class, "2", "1")).contains("time from a dependency's return to readiness over 1 rounds");
  }

  @Test
  @Tag(HEAVY)
  void locks() {
    // warm-up iterations, timed iterations, contended milliseconds
    assertThat(run(LockBenchmark.class, "2", "5", "100")).contains("| MariaDB 11.4 | ShedLock |");
  }

  private static String run(Class<?> main, String... args) {
    return run(main.getSimpleName() + " " + String.join(" ", args), main.getName(), args);
  }

  /** Runs {@code main} to its end and returns its output; fails unless it exits with 0 within the bound. */
  private static String run(String name, String main, String... args) {
    try (ChildJvm jvm = ChildJvm.startWithClassPath(name, JVM, System.getProperty("java.class.path"), main, args)) {
      int exit;
      try {
        exit = jvm.awaitExit(BOUND);
      } finally {
        // What the benchmark started and did not stop (it is killed on a timeout): only this run's own processes.
        ProcessHandle.of(jvm.pid()).ifPresent(p -> p.descendants().forEach(ProcessHandle::destroyForcibly));
        save(name, jvm);
      }
      String out = String.join("\n", jvm.output());
      assertThat(exit).as("exit code of %s; its output:%n%s", name, out).isZero();
      return out;
    }
  }

  private static void save(String name, ChildJvm jvm) {
    try {
      Path dir = Files.createDirectories(Path.of("target", "smoke"));
      jvm.dumpOutput(dir.resolve(name + ".log"));
    } catch (IOException e) {
      throw new IllegalStateException("cannot write target/smoke/" + name + ".log", e);
    }
  }
}
