package dev.sluice.benchmarks.chaos;

import dev.sluice.mongodb.chaos.ChaosHarness;
import dev.sluice.mongodb.chaos.ChaosReport;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The long chaos run: the harness of sluice-mongodb's {@code ChaosTest} (three to five listener
 * JVMs, four partitions, 16 keys written at a steady rate; rounds of SIGKILL, SIGSTOP past the
 * lease, joins, and partitions of one member from the lease store, the source or the sink, with
 * latency episodes and connection resets on every member's proxies throughout; docs/adr/0108 and
 * 0109) for many rounds, printing one Markdown table row with every figure. Exits with status 1,
 * after the table, if any check failed.
 *
 * <p>Arguments: {@code [rounds (100)] [seed (random)] [writes per second (16)]
 * [minutes (13): no round starts after this; the table shows the rounds actually run]}. With {@code
 * -Dsluice.mongodb.uri=mongodb://...} it runs on a real deployment instead of the embedded server.
 */
public final class ChaosSoak {
  private ChaosSoak() {}

  public static void main(String[] args) {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 100;
    long seed = args.length > 1 ? Long.parseLong(args[1]) : ThreadLocalRandom.current().nextLong(1, 1_000_000);
    int perSecond = args.length > 2 ? Integer.parseInt(args[2]) : 16;
    int minutes = args.length > 3 ? Integer.parseInt(args[3]) : 13;
    ChaosHarness.Settings settings = new ChaosHarness.Settings(seed, rounds, Duration.ofSeconds(2), 10, 16,
        perSecond, 3, 5, Duration.ofSeconds(120), Duration.ofSeconds(10), Duration.ofSeconds(30),
        Path.of("target", "chaos-soak", Long.toString(seed)), Duration.ofMinutes(minutes), true, true);
    ChaosReport report;
    try (ChaosHarness harness = new ChaosHarness(settings, System.out)) {
      report = harness.run();
    }
    System.out.println();
    System.out.println(ChaosReport.tableHeader());
    System.out.println(report.tableRow());
    System.out.println();
    System.out.println("joins (member, live members, share, time to share): " + report.joinTimes());
    System.out.println("deepest replay of one key: " + report.deepestReplay() + " change(s)");
    System.out.println("through the members' proxies (connections, bytes up, bytes down): " + report.traffic());
    System.out.println("owner overlaps: " + report.overlaps());
    System.out.println("handling past the local deadline: " + report.deadlines());
    System.out.println("longest ownerless time: " + report.ownerless());
    List<String> failures = report.failures();
    if (failures.isEmpty()) {
      System.out.println("chaos soak, seed " + seed + ": every check held");
    } else {
      System.out.println("chaos soak, seed " + seed + ": FAILED checks:");
      failures.forEach(f -> System.out.println("  - " + f));
      System.exit(1);
    }
  }
}
