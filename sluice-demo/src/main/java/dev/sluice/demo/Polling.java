package dev.sluice.demo;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * How the demos wait for something another process does (a takeover, a delivery count): poll
 * with a deadline. The demos are programs, not tests, so there is no Awaitility on their class path.
 */
public final class Polling {
  private Polling() {}

  /** Polls {@code condition} every {@code every}; false if {@code timeout} passed first. */
  public static boolean until(Duration timeout, Duration every, BooleanSupplier condition)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        return false;
      }
      TimeUnit.NANOSECONDS.sleep(every.toNanos());
    }
    return true;
  }

  /** Like {@link #until}, polling every 50 ms, but a timeout ends the demo naming {@code what}. */
  public static void require(String what, Duration timeout, BooleanSupplier condition)
      throws InterruptedException {
    if (!until(timeout, Duration.ofMillis(50), condition)) {
      throw new IllegalStateException("Demo gave up waiting for " + what + " after " + timeout);
    }
  }

  /** Polls {@code value} every {@code every} until it is present or {@code timeout} passes. */
  public static <T> Optional<T> value(Duration timeout, Duration every, Supplier<Optional<T>> value)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      Optional<T> v = value.get();
      if (v.isPresent() || System.nanoTime() > deadline) {
        return v;
      }
      TimeUnit.NANOSECONDS.sleep(every.toNanos());
    }
  }

  /** {@link #value} polling every 50 ms; a timeout ends the demo naming {@code what}. */
  public static <T> T requireValue(String what, Duration timeout, Supplier<Optional<T>> value)
      throws InterruptedException {
    return value(timeout, Duration.ofMillis(50), value).orElseThrow(
        () -> new IllegalStateException("Demo gave up waiting for " + what + " after " + timeout));
  }

  /**
   * Stops a periodic status line: no further runs, and a run in progress finishes its line (an
   * interrupt would end its store read with an error line just before the final status).
   */
  public static void stopQuietly(java.util.concurrent.ScheduledExecutorService status) {
    status.shutdown();
    try {
      status.awaitTermination(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
