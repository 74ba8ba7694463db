package dev.sluice.mongodb.chaos;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.Test;

/**
 * The short chaos run of {@link ChaosHarness} in the build: three to five listener JVMs on four
 * partitions, six rounds (one of each kind, in an order the seed shuffles) of SIGKILL, SIGSTOP past
 * the lease, a join, and partitions of one member from the lease store, the source or the sink (a
 * blackhole of one to two leases), with latency episodes of up to the renew interval and connection
 * resets on every proxy until every written change is applied, while 16 keys are written; then the
 * ground-truth checks (nothing lost, per-key order among accepted writes, no two owners at once, no
 * handling past the local lease deadline, duplicates bounded by the checkpoint batch, and the final
 * balance, awaited once the noise has ended). Each member's
 * clients reach the server through fault proxies of its own with {@code directConnection=true}
 * (docs/adr/0108); the test asserts that every role's proxies carried connections and bytes both
 * ways. {@code -Dchaos.seed=<n>} repeats a run's choices (the seed is printed and named in every
 * failure), {@code -Dchaos.rounds=<n>} changes the round count, {@code
 * -Dsluice.mongodb.uri=mongodb://...} runs it on a real deployment whose primary is on this machine
 * (a fault proxy forwards only to loopback). The long version is {@code
 * dev.sluice.benchmarks.chaos.ChaosSoak} in sluice-benchmarks.
 */
class ChaosTest {

  static ChaosHarness.Settings shortRun() {
    long seed = Long.getLong("chaos.seed", ThreadLocalRandom.current().nextLong(1, 1_000_000));
    int rounds = Integer.getInteger("chaos.rounds", ChaosHarness.Action.values().length);
    Duration lease = Duration.ofSeconds(2);
    // The end waits as long as the settling of a member paused twice may take (docs/adr/0008).
    return new ChaosHarness.Settings(seed, rounds, lease, 10, 16, 40, 3, 5,
        Duration.ofSeconds(60), Duration.ZERO, lease.multipliedBy(ChaosHarness.BALANCE_LEASES + 3),
        Path.of("target", "chaos", Long.toString(seed)), Duration.ofMinutes(30), true, true);
  }

  @Test
  void killsPausesJoinsPartitionsLatencyAndResetsLoseNothingKeepOrderNeverTwoOwnersStopAtTheDeadlineAndEndBalanced() {
    ChaosHarness.Settings settings = shortRun();
    ChaosReport report;
    try (ChaosHarness harness = new ChaosHarness(settings, System.out)) {
      report = harness.run();
    }
    System.out.println(ChaosReport.tableHeader());
    System.out.println(report.tableRow());
    String seed = "chaos seed " + settings.seed() + " (repeat with -Dchaos.seed=" + settings.seed()
        + "; members' output in " + settings.outputDir().toAbsolutePath() + ")";

    assertThat(report.rounds()).as(seed + ": rounds run").isEqualTo(settings.rounds());
    if (settings.rounds() >= ChaosHarness.Action.values().length) { // each bag of six holds every kind once
      for (ChaosHarness.Action kind : ChaosHarness.Action.values()) {
        assertThat(report.roundsByKind().getOrDefault(kind, 0)).as(seed + ": rounds of kind " + kind).isPositive();
      }
      assertThat(report.takeovers()).as(seed + ": takeovers happened").isPositive();
    }
    for (ChaosHarness.Role role : ChaosHarness.Role.values()) {
      ChaosReport.Traffic t = report.traffic().get(role);
      assertThat(t.connections()).as(seed + ": connections through the " + role + " proxies").isPositive();
      assertThat(t.bytesUp()).as(seed + ": bytes to the server through the " + role + " proxies").isPositive();
      assertThat(t.bytesDown()).as(seed + ": bytes back through the " + role + " proxies").isPositive();
    }
    assertThat(report.latencyEpisodes()).as(seed + ": latency episodes").isPositive();
    assertThat(report.resets()).as(seed + ": connection resets").isPositive();
    assertThat(report.deadlines().begun()).as(seed + ": changes whose start the deadline watch checked")
        .isGreaterThanOrEqualTo(report.written());
    assertThat(report.written()).as(seed + ": changes written").isGreaterThan(100);
    assertThat(report.failures()).as(seed + ": every check of the run").isEmpty();
  }
}
