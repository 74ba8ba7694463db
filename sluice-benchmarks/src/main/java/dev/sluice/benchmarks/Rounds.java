package dev.sluice.benchmarks;

import java.util.ArrayList;
import java.util.List;

/**
 * The measuring scheme of the side-by-side benchmarks (machines here are noisy): every round runs
 * every variant, the first {@code warmup} rounds are not counted, and a figure is the median of the
 * in-round ratios to variant 0 (the baseline of the same round), with their range.
 */
public final class Rounds {
  /** Runs variant {@code v} of round {@code r} (1-based) and returns its rate. */
  @FunctionalInterface
  public interface Variant {
    double run(int round, int variant) throws Exception;
  }

  private final String[] names;
  private final List<double[]> measured = new ArrayList<>();

  private Rounds(String[] names) {
    this.names = names;
  }

  /**
   * Runs {@code warmup + rounds} rounds of every variant in order, printing each round's rates,
   * and keeps the measured ones.
   */
  public static Rounds run(String[] names, int warmup, int rounds, Variant variant) throws Exception {
    Rounds result = new Rounds(names);
    for (int r = 1; r <= warmup + rounds; r++) {
      double[] x = new double[names.length];
      for (int v = 0; v < names.length; v++) {
        x[v] = variant.run(r, v);
      }
      StringBuilder line = new StringBuilder(r <= warmup ? "warm-up " + r + ":" : "round " + (r - warmup) + ":");
      for (double d : x) {
        line.append(String.format(" %.0f/s", d));
      }
      System.out.println(line);
      if (r > warmup) {
        result.measured.add(x);
      }
    }
    return result;
  }

  /** Rounds measured elsewhere (one array per round, a value per variant), for the same printing. */
  public static Rounds of(String[] names, List<double[]> measured) {
    Rounds r = new Rounds(names);
    r.measured.addAll(measured);
    return r;
  }

  /** The measured rounds' rates, variant by variant. */
  public List<double[]> measured() {
    return measured;
  }

  /** One line per variant: {@code | name | median rate | median ratio [min-max] |}. */
  public void printRatiosToBaseline() {
    for (int v = 0; v < names.length; v++) {
      double[] rates = sorted(v, -1);
      double[] ratios = sorted(v, 0);
      System.out.printf("| %s | %.0f | %.3f [%.3f-%.3f] |%n", names[v], median(rates), median(ratios), ratios[0],
          ratios[ratios.length - 1]);
    }
  }

  /** {@code what: median [min-max]} of the in-round ratio of variant {@code a} to variant {@code b}. */
  public void printRatio(String what, int a, int b) {
    double[] r = sorted(a, b);
    System.out.printf("%s: %.2f [%.2f-%.2f]%n", what, median(r), r[0], r[r.length - 1]);
  }

  /** The sorted in-round values of variant {@code v}, divided by those of {@code over} unless it is -1. */
  public double[] sorted(int v, int over) {
    return measured.stream().mapToDouble(x -> over < 0 ? x[v] : x[v] / x[over]).sorted().toArray();
  }

  /** The median of sorted values. */
  public static double median(double[] sorted) {
    int n = sorted.length;
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  }
}
