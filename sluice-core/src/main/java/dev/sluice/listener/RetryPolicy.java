package dev.sluice.listener;

import dev.sluice.ConfigurationException;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Exponential back-off with full jitter for a change whose handler failed.
 *
 * @param maxAttempts attempts before the {@link FailurePolicy} gives up on the change (at least 1;
 *     {@link Integer#MAX_VALUE} means forever)
 * @param initialDelay delay before the second attempt
 * @param maxDelay cap of the delay
 * @param multiplier growth factor per attempt, at least 1
 */
public record RetryPolicy(int maxAttempts, Duration initialDelay, Duration maxDelay, double multiplier) {
  public RetryPolicy {
    ConfigurationException.requireNonNull(initialDelay, "retry initialDelay");
    ConfigurationException.requireNonNull(maxDelay, "retry maxDelay");
    ConfigurationException.require(maxAttempts >= 1, "retry maxAttempts", maxAttempts, "must be >= 1");
    ConfigurationException.require(
        !initialDelay.isNegative(), "retry initialDelay", initialDelay, "must not be negative");
    ConfigurationException.require(
        maxDelay.compareTo(initialDelay) >= 0, "retry maxDelay", maxDelay, "must be >= initialDelay " + initialDelay);
    ConfigurationException.require(multiplier >= 1.0, "retry multiplier", multiplier, "must be >= 1");
  }

  /** 5 attempts, 100 ms doubling up to 5 s. */
  public static RetryPolicy defaults() {
    return new RetryPolicy(5, Duration.ofMillis(100), Duration.ofSeconds(5), 2.0);
  }

  public static RetryPolicy forever(Duration initialDelay, Duration maxDelay) {
    return new RetryPolicy(Integer.MAX_VALUE, initialDelay, maxDelay, 2.0);
  }

  public static RetryPolicy attempts(int maxAttempts, Duration initialDelay, Duration maxDelay) {
    return new RetryPolicy(maxAttempts, initialDelay, maxDelay, 2.0);
  }

  /** The delay before attempt {@code attempt + 1}, after {@code attempt} failures (1-based). */
  public Duration delayAfter(int attempt) {
    double base = initialDelay.toNanos() * Math.pow(multiplier, Math.max(0, attempt - 1));
    long capped = (long) Math.min(base, maxDelay.toNanos());
    // Full jitter, but never below half the step so a retry storm still backs off.
    long jittered = capped / 2 + (capped > 1 ? ThreadLocalRandom.current().nextLong(capped / 2 + 1) : 0);
    return Duration.ofNanos(jittered);
  }
}
