package dev.sluice.spring.boot;

import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.metrics.MicrometerObserver;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * Sluice's meters in the application's {@link MeterRegistry}, as {@code sluice run} publishes them:
 * a {@link MicrometerObserver} per listener, watching its status for the lag and history gauges.
 * Only loaded when Micrometer is on the class path.
 */
final class Metrics {
  private final MicrometerObserver observer;

  private Metrics(MicrometerObserver observer) {
    this.observer = observer;
  }

  /** The meters of consumer group {@code group} in {@code registry} (a MeterRegistry). */
  static Metrics of(Object registry, String group) {
    return new Metrics(new MicrometerObserver((MeterRegistry) registry, group));
  }

  ListenerObserver observer() {
    return observer;
  }

  /** Adds the gauges read from the built listener's status. */
  void watch(Listener<?> listener) {
    observer.watch(listener);
  }
}
