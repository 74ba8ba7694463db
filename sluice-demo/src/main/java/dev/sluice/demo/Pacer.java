package dev.sluice.demo;

import java.util.concurrent.TimeUnit;

/** Paces a demo writer to a rate: call {@link #pace()} after each write. */
public final class Pacer {
  private final long intervalNanos;
  private long next = System.nanoTime();

  public Pacer(double perSecond) {
    if (!(perSecond > 0)) {
      throw new IllegalArgumentException("rate must be positive, but was " + perSecond);
    }
    this.intervalNanos = (long) (TimeUnit.SECONDS.toNanos(1) / perSecond);
  }

  /**
   * Waits until the next write is due (at once if the writer is behind).
   *
   * @return false if interrupted; the interrupt flag is set again and the writer should stop
   */
  public boolean pace() {
    next += intervalNanos;
    long wait = next - System.nanoTime();
    if (wait > 0) {
      try {
        TimeUnit.NANOSECONDS.sleep(wait);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }
}
