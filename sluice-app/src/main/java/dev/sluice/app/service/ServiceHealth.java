package dev.sluice.app.service;

import dev.sluice.app.cli.Messages;
import dev.sluice.app.service.http.HttpEndpoint;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What the HTTP endpoint reports about a running {@link SluiceService}. Every database call is
 * bounded by {@link #BOUND}, so a MongoDB or PostgreSQL that stops answering makes readiness DOWN
 * within seconds instead of hanging the probe.
 *
 * @param <D> the source's document type
 */
final class ServiceHealth<D> implements HttpEndpoint.Probe {
  /** The longest any one database call of a probe may take. */
  static final Duration BOUND = Duration.ofSeconds(2);
  /** States of a partition this process holds that need an operator. */
  private static final Set<PartitionState> NOT_READY = EnumSet.of(PartitionState.FAILED, PartitionState.BLOCKED,
      PartitionState.ENDED);

  /** One relayed collection or table of the service. */
  record Entry(String target, Listener<?> listener, String sink, SinkReach reach) {}

  private final Wiring<D> wiring;
  private final List<Entry> entries;
  private final java.util.function.BooleanSupplier running;
  private final PrometheusMeterRegistry prometheus;
  private volatile LeaseStore leases;
  private volatile DeadLetterStore<D> deadLetters;

  /**
   * @param entries the service's listeners, filled while it starts (read live, not copied)
   * @param running whether every listener is built and started
   */
  private ServiceHealth(Wiring<D> wiring, List<Entry> entries, java.util.function.BooleanSupplier running,
      PrometheusMeterRegistry prometheus) {
    this.wiring = wiring;
    this.entries = entries;
    this.running = running;
    this.prometheus = prometheus;
  }

  /** The probe of a service on {@code wiring}'s source. */
  static <D> ServiceHealth<D> of(Wiring<D> wiring, List<Entry> entries, java.util.function.BooleanSupplier running,
      PrometheusMeterRegistry prometheus) {
    return new ServiceHealth<>(wiring, entries, running, prometheus);
  }

  @Override
  public HttpEndpoint.Readiness readiness() {
    List<String> problems = new ArrayList<>();
    if (!running.getAsBoolean()) {
      problems.add("starting: " + entries.size() + " listener(s) built so far");
    }
    String sourceProblem = wiring.sourceProblem();
    if (sourceProblem != null) {
      problems.add(sourceProblem);
    }
    for (Entry e : entries) {
      String sinkProblem = e.reach().problem();
      if (sinkProblem != null) {
        problems.add(e.sink() + ": " + sinkProblem);
      }
      for (PartitionStatus p : e.listener().status()) {
        if (NOT_READY.contains(p.state())) {
          problems.add(p.lease() + " is " + p.state() + (p.error() == null ? "" : ": " + p.error()));
        }
      }
    }
    return new HttpEndpoint.Readiness(problems);
  }

  @Override
  public Map<String, Object> status() {
    List<LeaseRecord> records = null;
    String recordsError = null;
    try {
      records = leases().list("");
    } catch (RuntimeException e) {
      recordsError = Messages.oneLine(e);
    }
    List<Map<String, Object>> listeners = new ArrayList<>();
    for (Entry e : entries) {
      ListenerConfig<?> config = e.listener().config();
      Map<String, Object> l = new LinkedHashMap<>();
      l.put(wiring.targetKind(), e.target());
      l.put("stream", config.feed().stream());
      l.put("group", config.group());
      l.put("owner", e.listener().owner());
      l.put("sink", e.sink());
      List<Map<String, Object>> partitions = new ArrayList<>();
      for (PartitionStatus p : e.listener().status()) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("lease", p.lease());
        m.put("state", p.state().name());
        m.put("epoch", p.epoch());
        m.put("processed", p.processed());
        m.put("committed", p.committed() == null ? null : p.committed().token());
        m.put("committedTime", text(p.committed() == null ? null : p.committed().time()));
        m.put("lagMillis", p.lag().toMillis());
        m.put("historyLeftSeconds", p.historyLeft() == null ? null : p.historyLeft().toSeconds());
        m.put("error", p.error());
        m.put("errorAt", text(p.errorAt()));
        m.put("restarts", p.restarts());
        m.put("attempts", p.attempts());
        m.put("nextAttemptAt", text(p.nextAttemptAt()));
        m.put("flapping", p.flapping());
        partitions.add(m);
      }
      l.put("partitions", partitions);
      List<Map<String, Object>> slots = wiring.slots(e.listener(), records);
      if (slots != null) {
        l.put("slots", slots);
      }
      if (records != null) {
        l.put("records", records.stream().filter(r -> r.name().startsWith(config.partitionPrefix()))
            .map(ServiceHealth::record).toList());
      } else {
        l.put("recordsError", recordsError);
      }
      try {
        l.put("parked", wiring.parked(deadLetters(), config.deadLetterScope()));
      } catch (RuntimeException ex) {
        l.put("parked", null);
        l.put("parkedError", Messages.oneLine(ex));
      }
      listeners.add(l);
    }
    Map<String, Object> status = new LinkedHashMap<>();
    status.put("ready", readiness().ready());
    status.put("listeners", listeners);
    return status;
  }

  @Override
  public String metrics() {
    return prometheus.scrape();
  }

  private static Map<String, Object> record(LeaseRecord r) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("name", r.name());
    m.put("owner", r.owner());
    m.put("epoch", r.epoch());
    m.put("held", r.isHeld());
    m.put("expiresAt", text(r.expiresAt()));
    m.put("checkpoint", r.checkpoint() == null ? null : r.checkpoint().token());
    m.put("checkpointTime", text(r.checkpoint() == null ? null : r.checkpoint().time()));
    return m;
  }

  private static String text(Instant t) {
    return t == null ? null : t.toString();
  }

  /** Built on first use (building asks the server), with every call bounded by {@link #BOUND}. */
  private LeaseStore leases() {
    LeaseStore s = leases;
    if (s == null) {
      s = wiring.leaseStore(BOUND);
      leases = s;
    }
    return s;
  }

  private DeadLetterStore<D> deadLetters() {
    DeadLetterStore<D> s = deadLetters;
    if (s == null) {
      s = wiring.deadLetters(BOUND);
      deadLetters = s;
    }
    return s;
  }
}
