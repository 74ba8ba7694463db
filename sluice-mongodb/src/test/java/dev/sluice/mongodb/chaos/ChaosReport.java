package dev.sluice.mongodb.chaos;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;

/**
 * What one chaos run found, computed from the ground truth after every member caught up. The
 * definitions of each figure are in {@link ChaosHarness}; {@link #failures()} lists every check
 * that did not hold, so a run shows all of them at once.
 *
 * @param seed the seed of the round choices ({@code -Dchaos.seed})
 * @param rounds rounds run
 * @param kills members SIGKILLed
 * @param pauses members SIGSTOPped past their lease and resumed
 * @param joins members added (including replacements of killed ones)
 * @param written changes written
 * @param lost written changes never applied, with up to 20 examples
 * @param orderViolations count of per-key order violations, with up to 20 descriptions
 * @param duplicates accepted writes of a seq already applied before
 * @param duplicateBound checkpoint batch × (takeovers + feed re-opens + handler failures)
 * @param takeovers partition acquisitions after each partition's first one
 * @param feedReopens times a member re-opened a feed at its checkpoint inside one tenure
 * @param handlerFailures handler calls that failed and were retried
 * @param deepestReplay the most changes of one key re-applied by one replay
 * @param longestStall the longest time a partition applied nothing while the writer wrote
 * @param longestStallPartition the partition of {@code longestStall}
 * @param heldByMember partitions held per live member at the end
 * @param balanced whether every live member held floor(N/M) or ceil(N/M) and every partition was held
 * @param joinTimes per join, the time from the member's start to holding its share, or null if it
 *     did not get it before the next disruption (or, at the end, within the balance wait)
 * @param wallTime the whole run
 */
public record ChaosReport(
    long seed,
    int rounds,
    int kills,
    int pauses,
    int joins,
    long written,
    long lostCount,
    List<String> lost,
    long orderViolations,
    List<String> violations,
    long duplicates,
    long duplicateBound,
    long takeovers,
    long feedReopens,
    long handlerFailures,
    long deepestReplay,
    int checkpointBatch,
    Duration longestStall,
    int longestStallPartition,
    Map<String, Integer> heldByMember,
    boolean balanced,
    List<Join> joinTimes,
    Duration wallTime) {

  /** One join: the member, live members after it, its share floor(N/M), and the time to get it. */
  public record Join(String member, int members, int share, Duration toShare) {}

  /** One accepted write of a key's applied log. */
  record Applied(long seq, long epoch, String node, long at) {}

  /** Every check that failed, as sentences naming the seed; empty when the run passed. */
  public List<String> failures() {
    List<String> f = new ArrayList<>();
    if (lostCount > 0) {
      f.add(lostCount + " written change(s) never applied, e.g. " + lost);
    }
    if (orderViolations > 0) {
      f.add(orderViolations + " per-key order violation(s) among accepted writes, e.g. " + violations);
    }
    if (duplicates > duplicateBound) {
      f.add(duplicates + " duplicate(s), more than checkpoint batch " + checkpointBatch + " × (" + takeovers
          + " takeover(s) + " + feedReopens + " feed re-open(s) + " + handlerFailures + " handler failure(s)) = "
          + duplicateBound);
    }
    if (!balanced) {
      f.add("final assignment not balanced: " + heldByMember + " (each of " + heldByMember.size()
          + " live members must hold " + floor() + " or " + ceil() + " of " + ChaosHarness.PARTITIONS
          + " partitions, every partition held)");
    }
    return f;
  }

  int floor() {
    return heldByMember.isEmpty() ? 0 : ChaosHarness.PARTITIONS / heldByMember.size();
  }

  int ceil() {
    return heldByMember.isEmpty() ? 0 : (ChaosHarness.PARTITIONS + heldByMember.size() - 1) / heldByMember.size();
  }

  /** The figures as one Markdown table row (see {@link #tableHeader()}). */
  public String tableRow() {
    long measured = joinTimes.stream().filter(j -> j.share() > 0).count();
    long reachedWithShare = joinTimes.stream().filter(j -> j.share() > 0 && j.toShare() != null).count();
    List<Duration> reachedPositive = joinTimes.stream().filter(j -> j.share() > 0 && j.toShare() != null)
        .map(Join::toShare).sorted().toList();
    String joinCell = measured == 0 ? "no join with a share > 0"
        : reachedWithShare + " of " + measured + " got it; median " + seconds(median(reachedPositive))
            + ", max " + seconds(reachedPositive.isEmpty() ? null : reachedPositive.get(reachedPositive.size() - 1));
    return String.format(Locale.ROOT, "| %d | %d | %d / %d / %d | %,d | %d | %d | %,d (bound %,d: %d takeovers, %d re-opens,"
            + " %d retries × %d) | %s (partition %d) | %s %s | %s | %s |",
        seed, rounds, kills, pauses, joins, written, lostCount, orderViolations, duplicates, duplicateBound, takeovers,
        feedReopens, handlerFailures, checkpointBatch, seconds(longestStall), longestStallPartition, heldByMember,
        balanced ? "balanced" : "NOT balanced", joinCell, seconds(wallTime));
  }

  public static String tableHeader() {
    return "| seed | rounds | kills / pauses / joins | changes written | lost | order violations | duplicates"
        + " | longest stall | final balance | joining member gets its share | wall time |\n"
        + "|---|---|---|---|---|---|---|---|---|---|---|";
  }

  private static Duration median(List<Duration> sorted) {
    if (sorted.isEmpty()) {
      return null;
    }
    return sorted.get(sorted.size() / 2);
  }

  private static String seconds(Duration d) {
    return d == null ? "-" : String.format(Locale.ROOT, "%.1f s", d.toMillis() / 1000.0);
  }

  /**
   * Checks each key's applied log (in acceptance order) against what was written; see {@link
   * ChaosHarness} for the definitions.
   */
  static Analysis analyse(Map<String, List<Applied>> logs, Map<String, Long> written) {
    Analysis a = new Analysis();
    for (Map.Entry<String, Long> w : written.entrySet()) {
      String key = w.getKey();
      List<Applied> log = logs.getOrDefault(key, List.of());
      long max = 0;
      long lastEpoch = Long.MIN_VALUE;
      long prev = -1;
      boolean[] seen = new boolean[(int) Math.max(0, w.getValue()) + 1];
      for (Applied e : log) {
        if (e.epoch() < lastEpoch) {
          a.violation(key + ": seq " + e.seq() + " accepted under epoch " + e.epoch() + " (" + e.node()
              + ") after a write under epoch " + lastEpoch);
        }
        lastEpoch = Math.max(lastEpoch, e.epoch());
        if (e.seq() > max + 1) {
          a.violation(key + ": seq " + e.seq() + " accepted (epoch " + e.epoch() + ", " + e.node()
              + ") before seq " + (max + 1));
        }
        if (e.seq() <= max) {
          a.duplicates++;
          if (e.seq() != prev + 1) {
            a.deepestReplay = Math.max(a.deepestReplay, max - e.seq() + 1);
          }
        }
        if (e.seq() >= 1 && e.seq() < seen.length) {
          seen[(int) e.seq()] = true;
        } else {
          a.violation(key + ": seq " + e.seq() + " accepted but only 1.." + w.getValue() + " were written");
        }
        max = Math.max(max, e.seq());
        prev = e.seq();
      }
      for (int s = 1; s < seen.length; s++) {
        if (!seen[s]) {
          a.lostCount++;
          if (a.lost.size() < 20) {
            a.lost.add(key + ":" + s);
          }
        }
      }
    }
    return a;
  }

  /** A partition that applied nothing from {@code fromMillis} for {@code length}. */
  record Stall(int partition, long fromMillis, Duration length) {}

  /** Longest gap between consecutive accepted writes of one partition that began before {@code until}. */
  static Stall longestStall(Map<Integer, List<Long>> timesByPartition, long from, long until) {
    int worst = -1;
    long worstFrom = from;
    long longest = 0;
    for (Map.Entry<Integer, List<Long>> p : new TreeMap<>(timesByPartition).entrySet()) {
      List<Long> times = new ArrayList<>(p.getValue());
      Collections.sort(times);
      long previous = from;
      for (long t : times) {
        if (previous < until && t - previous > longest) {
          longest = t - previous;
          worst = p.getKey();
          worstFrom = previous;
        }
        previous = Math.max(previous, t);
      }
    }
    return new Stall(worst, worstFrom, Duration.ofMillis(longest));
  }

  static final class Analysis {
    long lostCount;
    final List<String> lost = new ArrayList<>();
    long orderViolations;
    final List<String> violations = new ArrayList<>();
    long duplicates;
    long deepestReplay;

    void violation(String what) {
      orderViolations++;
      if (violations.size() < 20) {
        violations.add(what);
      }
    }
  }

  @Override
  public String toString() {
    return "ChaosReport[seed=" + seed + ", rounds=" + rounds + ", written=" + written + ", lost=" + lostCount
        + ", orderViolations=" + orderViolations + ", duplicates=" + duplicates + "/" + duplicateBound
        + ", longestStall=" + longestStall + " (partition " + longestStallPartition + "), held=" + heldByMember
        + ", balanced=" + balanced + ", joins=" + joinTimes.stream().map(Join::toString).collect(Collectors.joining(", "))
        + "]";
  }
}
