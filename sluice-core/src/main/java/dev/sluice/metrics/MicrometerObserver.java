package dev.sluice.metrics;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionStatus;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Publishes one listener's metrics to Micrometer. Per-change meters carry the tags {@code group}
 * (the listener's consumer group) and {@code stream}, so two groups reading one collection are
 * counted apart; per-partition meters carry {@code lease} = the partition's lease name
 * ({@code group/stream#<i>of<n>}):
 *
 * <ul>
 *   <li>{@code sluice.changes.delivered} (counter), {@code sluice.handler.duration} (timer)
 *   <li>{@code sluice.handler.failures}, {@code sluice.changes.parked} (counters)
 *   <li>{@code sluice.checkpoints} (counter), {@code sluice.checkpoint.age.seconds} (gauge: now
 *       minus the source time of the last committed change; with heartbeats it stays small for
 *       an idle partition too, but it is not the lag)
 *   <li>once {@link #watch} was called with the listener: {@code sluice.partition.lag.seconds}
 *       (gauge: how far behind the source the last processed change is, 0 when caught up; see
 *       {@link PartitionStatus#lag()}; 0 on an instance that does not hold the partition, so
 *       take the maximum over instances) and {@code sluice.partition.history.seconds} (gauge:
 *       how much source history is left before the checkpoint falls out of it, see {@link
 *       PartitionStatus#historyLeft()}; NaN where unknown or not held)
 *   <li>{@code sluice.leases.acquired}, {@code sluice.leases.lost}, {@code sluice.history.lost},
 *       {@code sluice.feed.failures} (counters), {@code sluice.partition.active} (gauge 0/1)
 *   <li>{@code sluice.partition.state} (gauge, tags {@code lease} and {@code state}: 1 for the
 *       state this process sees the partition in, 0 for every other {@link PartitionState})
 *   <li>{@code sluice.flush.duration} (timer, tags {@code lease} and {@code outcome}
 *       {@code acknowledged} or {@code failed}): from asking the handler to flush until it did; for
 *       a broker sink, the broker's acknowledgement latency
 * </ul>
 *
 * <p>In Prometheus: dots become underscores, counters end in {@code _total}, the timer is a
 * summary in seconds. Micrometer is an optional dependency of sluice-core: add it to use this
 * class.
 */
public final class MicrometerObserver implements ListenerObserver {
  private final MeterRegistry registry;
  private final String group;
  private final Map<String, AtomicLong> active = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> committedSourceMillis = new ConcurrentHashMap<>();

  /** The observer of one listener of consumer group {@code group}. */
  public MicrometerObserver(MeterRegistry registry, String group) {
    this.registry = java.util.Objects.requireNonNull(registry, "registry");
    this.group = java.util.Objects.requireNonNull(group, "group");
  }

  private io.micrometer.core.instrument.Tags changeTags(ChangeEvent<?> event) {
    return io.micrometer.core.instrument.Tags.of("group", group, "stream", event.stream());
  }

  private final Map<String, AtomicReference<PartitionState>> states = new ConcurrentHashMap<>();

  private Counter counter(String name, String lease) {
    return registry.counter(name, "lease", lease);
  }

  @Override
  public void stateChanged(String lease, PartitionState from, PartitionState to) {
    activeGauge(lease).set(to == PartitionState.ACTIVE ? 1 : 0);
    stateGauges(lease).set(to);
  }

  private AtomicLong activeGauge(String lease) {
    return active.computeIfAbsent(lease, l -> registry.gauge("sluice.partition.active",
        io.micrometer.core.instrument.Tags.of("lease", l), new AtomicLong()));
  }

  /** The partition's state gauges, one per {@link PartitionState}; registered at STOPPED the first time. */
  private AtomicReference<PartitionState> stateGauges(String lease) {
    return states.computeIfAbsent(lease, l -> {
      AtomicReference<PartitionState> current = new AtomicReference<>(PartitionState.STOPPED);
      for (PartitionState state : PartitionState.values()) {
        Gauge.builder("sluice.partition.state", current, c -> c.get() == state ? 1 : 0)
            .tags("lease", l, "state", state.name())
            .description("1 for the state this process sees the partition in, 0 for the others")
            .register(registry);
      }
      return current;
    });
  }

  @Override
  public void flushed(String lease, int changes, long nanos, Throwable failure) {
    flushTimer(lease, failure == null ? "acknowledged" : "failed").record(nanos, TimeUnit.NANOSECONDS);
  }

  private Timer flushTimer(String lease, String outcome) {
    return Timer.builder("sluice.flush.duration").tags("lease", lease, "outcome", outcome)
        .description("From asking the handler to flush (a broker sink: to acknowledge) until it did")
        .register(registry);
  }

  @Override
  public void acquired(Lease lease) {
    counter("sluice.leases.acquired", lease.name()).increment();
  }

  @Override
  public void lost(String lease, long epoch, String reason) {
    counter("sluice.leases.lost", lease).increment();
  }

  @Override
  public void delivered(ChangeEvent<?> event, long handlerNanos) {
    registry.counter("sluice.changes.delivered", changeTags(event)).increment();
    Timer.builder("sluice.handler.duration").tags(changeTags(event)).register(registry)
        .record(handlerNanos, TimeUnit.NANOSECONDS);
  }

  @Override
  public void committed(String lease, long epoch, Position position, int changes) {
    counter("sluice.checkpoints", lease).increment();
    if (position.time() != null) {
      committedSourceMillis.computeIfAbsent(lease, l -> {
        AtomicLong holder = new AtomicLong();
        registry.gauge("sluice.checkpoint.age.seconds", io.micrometer.core.instrument.Tags.of("lease", l),
            holder, h -> h.get() == 0 ? 0 : Duration.between(Instant.ofEpochMilli(h.get()), Instant.now()).toMillis() / 1000.0);
        return holder;
      }).set(position.time().toEpochMilli());
    }
  }

  /**
   * Adds the gauges read from {@code listener}'s status: {@code sluice.partition.lag.seconds} and
   * {@code sluice.partition.history.seconds}, tagged {@code lease}. Call once the listener is
   * built (its observer, this one, exists before it).
   */
  public void watch(Listener<?> listener) {
    // Every series from the start, at zero: a rate or an alert on a counter that appears only at
    // its first increment sees nothing until the second one.
    io.micrometer.core.instrument.Tags change =
        io.micrometer.core.instrument.Tags.of("group", group, "stream", listener.config().feed().stream());
    for (String name : List.of("sluice.changes.delivered", "sluice.handler.failures", "sluice.changes.parked")) {
      registry.counter(name, change);
    }
    Timer.builder("sluice.handler.duration").tags(change).register(registry);
    for (int i = 0; i < listener.config().partitions(); i++) {
      String lease = listener.config().leaseName(i);
      for (String name : List.of("sluice.leases.acquired", "sluice.leases.lost", "sluice.checkpoints",
          "sluice.history.lost", "sluice.feed.failures")) {
        counter(name, lease);
      }
      for (String outcome : List.of("acknowledged", "failed")) {
        flushTimer(lease, outcome);
      }
      activeGauge(lease);
      stateGauges(lease);
      Gauge.builder("sluice.partition.lag.seconds", listener,
              l -> statusOf(l, lease).map(s -> s.lag().toMillis() / 1000.0).orElse(Double.NaN))
          .tags("lease", lease)
          .description("How far behind the source the last processed change is; 0 when caught up")
          .register(registry);
      Gauge.builder("sluice.partition.history.seconds", listener,
              l -> statusOf(l, lease).map(PartitionStatus::historyLeft)
                  .map(d -> d.toMillis() / 1000.0).orElse(Double.NaN))
          .tags("lease", lease)
          .description("Source history left before the checkpoint falls out of it")
          .register(registry);
    }
  }

  private static java.util.Optional<PartitionStatus> statusOf(Listener<?> listener, String lease) {
    return listener.status().stream().filter(s -> s.lease().equals(lease)).findFirst();
  }

  @Override
  public void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {
    registry.counter("sluice.handler.failures", changeTags(event)).increment();
  }

  @Override
  public void parked(ChangeEvent<?> event, String reason) {
    registry.counter("sluice.changes.parked", changeTags(event)).increment();
  }

  @Override
  public void feedFailed(String lease, Throwable error) {
    counter("sluice.feed.failures", lease).increment();
  }

  @Override
  public void historyLost(String lease, HistoryLostException error, Position resumedAt) {
    counter("sluice.history.lost", lease).increment();
  }
}
