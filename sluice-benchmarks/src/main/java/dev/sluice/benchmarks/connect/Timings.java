package dev.sluice.benchmarks.connect;

import dev.sluice.benchmarks.Rounds;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Two definitions of a variant's throughput side by side (issue 36 target 2). The old one runs the
 * clock from the variant's start (the relay's {@code Listener.start()}, the connector's REST {@code
 * resume}) to the last record received, so it includes the relay's cold start (lease, cursor) and
 * the connector's warm resume. The new one runs it from the first record the {@code read_committed}
 * consumer received to the last, counting the records after the first; the time from the start to
 * the first record is reported separately.
 */
final class Timings {
  /**
   * One variant's run: nanoTimes of its start, its first record and its last, the records, and the
   * wall-clock split of its (first) partition or task thread ({@link WallProfile}).
   */
  record Run(long start, long first, long end, long records, String split) {
    double rateFromStart() {
      return records / ((end - start) / 1e9);
    }

    double rateFromFirst() {
      return (records - 1) / ((end - first) / 1e9);
    }

    double firstMillis() {
      return (first - start) / 1e6;
    }
  }

  private final String[] names;
  private final int warmup;
  private final List<Run[]> rounds = new ArrayList<>();

  Timings(String[] names, int warmup) {
    this.names = names;
    this.warmup = warmup;
  }

  /** Records variant {@code v} of round {@code r} (1-based) and returns its rate by the old definition. */
  synchronized double add(int r, int v, Run run) {
    while (rounds.size() < r) {
      rounds.add(new Run[names.length]);
    }
    rounds.get(r - 1)[v] = run;
    System.out.printf("  round %d, %s: %.0f/s from the start, %.0f/s from the first record, first record after"
        + " %.0f ms%n    thread: %s%n", r, names[v], run.rateFromStart(), run.rateFromFirst(), run.firstMillis(),
        run.split());
    return run.rateFromStart();
  }

  /** Prints both definitions' tables and the time to the first record, over the measured rounds. */
  void print() {
    List<Run[]> measured = rounds.subList(Math.min(warmup, rounds.size()), rounds.size());
    System.out.println("\nold definition: from the start (relay: Listener.start(); connector: REST resume) to the last"
        + " record");
    Rounds.of(names, measured.stream().map(x -> Arrays.stream(x).mapToDouble(Run::rateFromStart).toArray()).toList())
        .printRatiosToBaseline();
    System.out.println("new definition: from the first record received to the last");
    Rounds.of(names, measured.stream().map(x -> Arrays.stream(x).mapToDouble(Run::rateFromFirst).toArray()).toList())
        .printRatiosToBaseline();
    System.out.println("time from the start to the first record, ms: median [min-max]");
    for (int v = 0; v < names.length; v++) {
      int variant = v;
      double[] ms = measured.stream().mapToDouble(x -> x[variant].firstMillis()).sorted().toArray();
      System.out.printf("| %s | %.0f [%.0f-%.0f] |%n", names[v], Rounds.median(ms), ms[0], ms[ms.length - 1]);
    }
  }

  /**
   * The indices of the variants to run: {@code -Dsluice.bench.variants=0,1,5} (a comma-separated
   * list, the baseline 0 first), or the first {@code all} by default.
   */
  static int[] selected(int all) {
    String list = System.getProperty("sluice.bench.variants");
    if (list == null || list.isBlank()) {
      return java.util.stream.IntStream.range(0, all).toArray();
    }
    return Arrays.stream(list.split(",")).mapToInt(v -> Integer.parseInt(v.trim())).toArray();
  }

  /** The names of the {@code selected} variants. */
  static String[] names(String[] all, int[] selected) {
    return Arrays.stream(selected).mapToObj(v -> all[v]).toArray(String[]::new);
  }
}
