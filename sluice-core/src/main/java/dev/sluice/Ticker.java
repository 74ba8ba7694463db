package dev.sluice;

/**
 * A monotonic time source in nanoseconds, for measuring elapsed time (lease deadlines held by this
 * process, wait timeouts). Unlike a wall clock it never jumps; its origin is arbitrary, so only
 * differences of its values mean anything. Inject a custom one in tests.
 */
@FunctionalInterface
public interface Ticker {

  long nanos();

  /** {@link System#nanoTime()}. */
  static Ticker system() {
    return System::nanoTime;
  }
}
