package dev.sluice.app.cli;

import java.io.PrintWriter;
import java.util.function.LongSupplier;

/**
 * A progress line for long commands, on standard error so that standard output stays the result:
 * printed at most once per interval (the first after one interval, so a short run prints none).
 */
public final class ProgressLine {
  private final PrintWriter err;
  private final long intervalNanos;
  private final LongSupplier clock;
  private long nextAt;

  public ProgressLine(PrintWriter err, long intervalMillis) {
    this(err, intervalMillis, System::nanoTime);
  }

  ProgressLine(PrintWriter err, long intervalMillis, LongSupplier clock) {
    this.err = err;
    this.intervalNanos = intervalMillis * 1_000_000;
    this.clock = clock;
    this.nextAt = clock.getAsLong() + intervalNanos;
  }

  /** Prints {@code text} if an interval passed since the last line. */
  public void update(String text) {
    long now = clock.getAsLong();
    if (now - nextAt >= 0) {
      err.println(text);
      err.flush();
      nextAt = now + intervalNanos;
    }
  }
}
