package dev.sluice.mongodb.chaos;

import java.time.Duration;
import java.time.Instant;
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
 * @param roundsByKind rounds run of each kind
 * @param latencyEpisodes latency episodes the run-long noise started on some proxy
 * @param resets times the noise reset every connection of one proxy
 * @param traffic per connection role, what went through the members' proxies (proof that the
 *     members' clients really used them)
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
 * @param overlaps two owners of one partition handling at once, on the ground truth
 * @param ownerless the longest time a partition had no owner on the store's clock (reported, no pass mark)
 * @param deadlines changes begun at or after the local deadline of the lease they were handled under
 * @param heldByMember partitions held per live member at the end
 * @param balanced whether every live member held floor(N/M) or ceil(N/M) and every partition was held
 * @param views when not balanced, each live member's own last view of the group (its last quota line,
 *     and how often and when last it lost its membership), so a failure explains itself; else empty
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
    Map<ChaosHarness.Action, Integer> roundsByKind,
    int latencyEpisodes,
    int resets,
    Map<ChaosHarness.Role, Traffic> traffic,
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
    Overlaps overlaps,
    Gap ownerless,
    Deadlines deadlines,
    Map<String, Integer> heldByMember,
    boolean balanced,
    List<String> views,
    List<Join> joinTimes,
    Duration wallTime) {

  /** One join: the member, live members after it, its share floor(N/M), and the time to get it. */
  public record Join(String member, int members, int share, Duration toShare) {}

  /** One accepted write of a key's applied log. */
  record Applied(long seq, long epoch, String node, long at) {}

  /** What went through one role's proxies: connections accepted, bytes to the server, bytes back. */
  public record Traffic(long connections, long bytesUp, long bytesDown) {}

  /** The longest time partition {@code partition} had no owner, from {@code fromMillis}; partition -1 if none. */
  public record Gap(int partition, long fromMillis, Duration length) {}

  /**
   * Owner overlaps on the ground truth: an older epoch of a partition whose handling (the start of a
   * change it wrote, as accepted) went on after a newer epoch's first one began. {@code count} and
   * {@code longest} are the overlaps of owners never stopped (SIGSTOP) across the takeover, which
   * nothing allows; {@code explainedByPause} those of an owner that was: a process stopped between
   * its lease check and its handler is what fencing exists for, and the order and fencing checks
   * judge what it wrote.
   */
  public record Overlaps(long count, Duration longest, List<String> examples, long explainedByPause,
      Duration longestExplained) {}

  /**
   * Changes begun at or after the local deadline of the lease they were handled under, from the
   * members' {@code LATE} and {@code DEADLINES} lines: {@code late} and {@code longestLate} count
   * members never stopped (SIGSTOP) between the deadline and the start, {@code explainedByPause}
   * those that were; {@code begun} changes were checked, {@code unknown} of them under a lease the
   * watch never saw granted, and {@code leastLeft} is the least time any change was begun before
   * its deadline (how close the run came).
   */
  public record Deadlines(long begun, long unknown, long late, Duration longestLate, List<String> examples,
      long explainedByPause, Duration leastLeft) {}

  /** Whether {@code node} was stopped (SIGSTOP) at some moment of [from, to] (wall-clock millis). */
  static boolean stoppedDuring(Map<String, List<long[]>> pauses, String node, long from, long to) {
    for (long[] p : pauses.getOrDefault(node, List.of())) {
      if (p[0] <= to && p[1] >= from) {
        return true;
      }
    }
    return false;
  }

  /**
   * Owner overlaps per partition (see {@link Overlaps}): for each pair of epochs e1 &lt; e2 of a
   * partition, the overlap is e1's last accepted handling start minus e2's first, when positive.
   * It is explained by a pause when e1's node was stopped during [e1's first, e2's first] and
   * resumed before e1's last handling.
   */
  static Overlaps overlaps(Map<Integer, List<Applied>> byPartition, Map<String, List<long[]>> pauses) {
    long count = 0;
    long explained = 0;
    long longest = 0;
    long longestExplained = 0;
    List<String> examples = new ArrayList<>();
    for (Map.Entry<Integer, List<Applied>> p : new TreeMap<>(byPartition).entrySet()) {
      TreeMap<Long, long[]> spans = new TreeMap<>(); // epoch -> {first, last}
      Map<Long, String> nodes = new TreeMap<>();
      for (Applied a : p.getValue()) {
        spans.merge(a.epoch(), new long[] {a.at(), a.at()},
            (x, y) -> new long[] {Math.min(x[0], y[0]), Math.max(x[1], y[1])});
        nodes.put(a.epoch(), a.node());
      }
      List<Long> epochs = new ArrayList<>(spans.keySet());
      for (int i = 0; i < epochs.size(); i++) {
        long[] older = spans.get(epochs.get(i));
        for (int j = i + 1; j < epochs.size(); j++) {
          long[] newer = spans.get(epochs.get(j));
          long overlap = older[1] - newer[0];
          if (overlap <= 0) {
            continue;
          }
          String node = nodes.get(epochs.get(i));
          boolean paused = false;
          for (long[] s : pauses.getOrDefault(node, List.of())) {
            if (s[0] >= older[0] && s[0] <= newer[0] && s[1] <= older[1]) {
              paused = true;
            }
          }
          if (paused) {
            explained++;
            longestExplained = Math.max(longestExplained, overlap);
          } else {
            count++;
            longest = Math.max(longest, overlap);
            if (examples.size() < 20) {
              examples.add("partition " + p.getKey() + ": epoch " + epochs.get(i) + " (" + node + ") handled until "
                  + Instant.ofEpochMilli(older[1]) + ", " + overlap + " ms after epoch " + epochs.get(j) + " ("
                  + nodes.get(epochs.get(j)) + ") began at " + Instant.ofEpochMilli(newer[0]));
            }
          }
        }
      }
    }
    return new Overlaps(count, Duration.ofMillis(longest), List.copyOf(examples), explained,
        Duration.ofMillis(longestExplained));
  }

  /** Reads the members' {@code LATE} and last {@code DEADLINES} lines (see {@link Deadlines}). */
  static Deadlines deadlines(List<String> output, Map<String, List<long[]>> pauses) {
    Map<String, Map<String, String>> lastSummary = new TreeMap<>();
    long late = 0;
    long explained = 0;
    long longestMicros = 0;
    List<String> examples = new ArrayList<>();
    for (String line : output) {
      if (line.startsWith("DEADLINES ")) {
        Map<String, String> f = fields(line);
        lastSummary.put(line.split(" ")[1], f);
      } else if (line.startsWith("LATE ")) {
        Map<String, String> f = fields(line);
        String node = line.split(" ")[1];
        long at = Long.parseLong(f.get("at"));
        long deadline = Long.parseLong(f.get("deadline"));
        long past = Long.parseLong(f.get("pastMicros"));
        if (stoppedDuring(pauses, node, deadline, at)) {
          explained++;
        } else {
          late++;
          longestMicros = Math.max(longestMicros, past);
          if (examples.size() < 20) {
            examples.add(line);
          }
        }
      }
    }
    long begun = 0;
    long unknown = 0;
    long leastLeft = Long.MAX_VALUE;
    for (Map<String, String> f : lastSummary.values()) {
      begun += Long.parseLong(f.get("begun"));
      unknown += Long.parseLong(f.get("unknown"));
      String least = f.get("leastLeftMicros");
      if (!"-".equals(least)) {
        leastLeft = Math.min(leastLeft, Long.parseLong(least));
      }
    }
    return new Deadlines(begun, unknown, late, Duration.ofNanos(longestMicros * 1_000), List.copyOf(examples),
        explained, leastLeft == Long.MAX_VALUE ? null : Duration.ofNanos(leastLeft * 1_000));
  }

  private static Map<String, String> fields(String line) {
    Map<String, String> f = new java.util.HashMap<>();
    for (String part : line.split(" ")) {
      int eq = part.indexOf('=');
      if (eq > 0) {
        f.put(part.substring(0, eq), part.substring(eq + 1));
      }
    }
    return f;
  }

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
    if (overlaps.count() > 0) {
      f.add(overlaps.count() + " owner overlap(s) on the ground truth (an older epoch handling after a newer one began,"
          + " its owner never stopped), longest " + overlaps.longest().toMillis() + " ms, e.g. " + overlaps.examples());
    }
    if (deadlines.unknown() > 0) {
      f.add(deadlines.unknown() + " change(s) handled under a lease the deadline watch never saw granted: the"
          + " deadline check is blind to them");
    }
    if (deadlines.late() > 0) {
      f.add(deadlines.late() + " change(s) begun after the local deadline of their lease (member never stopped),"
          + " longest " + deadlines.longestLate().toNanos() / 1_000 + " µs past, e.g. " + deadlines.examples());
    }
    if (!balanced) {
      f.add("final assignment not balanced: " + heldByMember + " (each of " + heldByMember.size()
          + " live members must hold " + floor() + " or " + ceil() + " of " + ChaosHarness.PARTITIONS
          + " partitions, every partition held); as each member saw it: " + views);
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
    String kinds = java.util.Arrays.stream(ChaosHarness.Action.values())
        .map(k -> Integer.toString(roundsByKind.getOrDefault(k, 0))).collect(Collectors.joining(" / "));
    String overlapCell = overlaps.count() + (overlaps.explainedByPause() == 0 ? ""
        : " (+" + overlaps.explainedByPause() + " of a SIGSTOPped owner, longest " + seconds(overlaps.longestExplained()) + ")");
    String lateCell = deadlines.late() == 0 ? "0" : deadlines.late() + ", longest " + deadlines.longestLate().toNanos() / 1_000 + " µs past";
    lateCell += " of " + String.format(Locale.ROOT, "%,d", deadlines.begun()) + " changes (least left "
        + (deadlines.leastLeft() == null ? "-" : deadlines.leastLeft().toMillis() + " ms") + ")"
        + (deadlines.explainedByPause() == 0 ? "" : "; +" + deadlines.explainedByPause() + " after a SIGSTOP");
    return String.format(Locale.ROOT, "| %d | %d | %s | %d / %d | %,d | %d | %d | %s | %,d (bound %,d: %d takeovers,"
            + " %d re-opens, %d retries × %d) | %s (partition %d) | %s | %s (partition %d) | %s %s | %s | %s |",
        seed, rounds, kinds, latencyEpisodes, resets, written, lostCount, orderViolations, overlapCell, duplicates,
        duplicateBound, takeovers, feedReopens, handlerFailures, checkpointBatch, seconds(ownerless.length()),
        ownerless.partition(), lateCell, seconds(longestStall), longestStallPartition, heldByMember,
        balanced ? "balanced" : "NOT balanced", joinCell, seconds(wallTime));
  }

  public static String tableHeader() {
    return "| seed | rounds | kill / pause / join / cut from store / cut from source / cut from sink"
        + " | latency episodes / resets | changes written | lost | order violations | owner overlaps | duplicates"
        + " | longest ownerless | handling past local deadline | longest stall | final balance"
        + " | joining member gets its share | wall time |\n"
        + "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";
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
        + ", overlaps=" + overlaps + ", ownerless=" + ownerless + ", deadlines=" + deadlines
        + ", longestStall=" + longestStall + " (partition " + longestStallPartition + "), held=" + heldByMember
        + ", balanced=" + balanced + ", joins=" + joinTimes.stream().map(Join::toString).collect(Collectors.joining(", "))
        + "]";
  }
}
