package dev.sluice.listener;

import java.time.Duration;

/**
 * The timings the engine's tests run with: 3 s leases renewed every 300 ms, acquisition attempts
 * every 50 ms and 20 ms polls, so that takeovers and hand-overs happen within a test's patience.
 */
final class EngineTimings {
  private EngineTimings() {}

  static <D> Listener.Builder<D> fast(Listener.Builder<D> builder) {
    return builder
        .leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofMillis(300))
        .acquireInterval(Duration.ofMillis(50))
        .pollWait(Duration.ofMillis(20));
  }
}
