package dev.sluice.app.service;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import dev.sluice.ConfigurationException;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.metrics.MicrometerObserver;
import dev.sluice.app.cli.Messages;
import dev.sluice.app.service.http.HttpEndpoint;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.binder.jvm.ClassLoaderMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmGcMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmMemoryMetrics;
import io.micrometer.core.instrument.binder.jvm.JvmThreadMetrics;
import io.micrometer.core.instrument.binder.system.FileDescriptorMetrics;
import io.micrometer.core.instrument.binder.system.ProcessorMetrics;
import io.micrometer.core.instrument.binder.system.UptimeMetrics;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The running service: one listener per configured collection (MongoDB) or table (PostgreSQL),
 * each relaying to its sink.
 */
public final class SluiceService implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(SluiceService.class);

  private final Wiring<?> wiring;
  private final List<Wiring.SinkHandle<?>> sinks = new ArrayList<>();
  private final List<Listener<?>> listeners = new ArrayList<>();
  private final List<ServiceHealth.Entry> entries = new java.util.concurrent.CopyOnWriteArrayList<>();
  /** Set once every listener is built and started: until then the service is not ready. */
  private volatile boolean running;
  private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();
  private final CompositeMeterRegistry meters = new CompositeMeterRegistry();
  private final PrometheusMeterRegistry prometheus = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
  private final List<AutoCloseable> binders = new ArrayList<>();
  private HttpEndpoint http;

  private SluiceService(SluiceConfig config, MeterRegistry registry) {
    this.wiring = Wiring.connect(config, true);
    meters.add(registry);
    meters.add(prometheus);
    bindProcessMeters();
    try {
      // Served from the start: while the database is waited for, the process is alive and not ready.
      startHttp(config.httpOrDefault());
      build(wiring, config);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  /** Checks the records of every entry (waiting for the database), then builds its sink and listener. */
  private <D> void build(Wiring<D> wiring, SluiceConfig config) {
    for (ListenerSection l : config.listeners()) {
      awaitReachable("check what reading " + wiring.describe(l) + " needs", () -> wiring.checkReadable(l));
      awaitReachable("check the records of " + wiring.describe(l), () -> wiring.checkLegacyCheckpoints(l));
    }
    for (ListenerSection l : config.listeners()) {
      Wiring.SinkHandle<D> sink = wiring.sink(l, null);
      sinks.add(sink);
      MicrometerObserver metrics = new MicrometerObserver(meters,
          dev.sluice.app.service.config.ConfigLoader.group(l, "listeners[" + config.listeners().indexOf(l) + "]"));
      Listener<D> listener = wiring.listener(l, sink.handler(), ListenerObserver.composite(metrics));
      metrics.watch(listener);
      wiring.bindSourceMeters(meters, listener);
      listeners.add(listener);
      entries.add(new ServiceHealth.Entry(l.target(), listener, sink.description(), sink.reach()));
      log.info("Relaying {} to {} as {}", wiring.describe(l), sink.description(), listener.owner());
    }
  }

  /**
   * The connection string's settings, with a socket read timeout of 30 s unless it sets one: a
   * server that keeps the connection and stops answering must fail a call, not hold a thread of
   * the service for ever.
   */
  static MongoClientSettings clientSettings(String uri) {
    ConnectionString cs = new ConnectionString(uri);
    MongoClientSettings.Builder b = MongoClientSettings.builder().applyConnectionString(cs);
    if (cs.getSocketTimeout() == null) {
      b.applyToSocketSettings(s -> s.readTimeout(30, TimeUnit.SECONDS));
    }
    return b.build();
  }

  /**
   * Runs {@code step} until the database answers it: an unreachable database at start is waited for
   * (logged, back-off up to 30 s), never an exit; a configuration error ends the start at once.
   */
  private void awaitReachable(String what, Runnable step) {
    long backoffMillis = 500;
    while (true) {
      try {
        step.run();
        return;
      } catch (ConfigurationException e) {
        throw e;
      } catch (RuntimeException e) {
        if (closed.get()) {
          throw e;
        }
        ConfigurationException refused = wiring.source().refusal(e);
        if (refused != null) {
          throw refused;
        }
        log.warn("Waiting for {} to {}: {}; retrying in {} ms", wiring.sourceName(), what, Messages.oneLine(e),
            backoffMillis);
        System.out.println("waiting for " + wiring.sourceName() + ": " + Messages.oneLine(e));
        try {
          Thread.sleep(backoffMillis); // a back-off between attempts, not a synchronisation
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw e;
        }
        backoffMillis = Math.min(backoffMillis * 2, 30_000);
      }
    }
  }

  private void stopListeners() {
    Map<String, Runnable> closes = new LinkedHashMap<>();
    Map<String, String> owners = new HashMap<>();
    for (Listener<?> l : listeners) {
      String thread = "sluice-close-" + l.owner() + "-" + closes.size();
      closes.put(thread, l::close);
      owners.put(thread, l.owner());
    }
    for (String late : BoundedClose.run(listenersBound(), closes)) {
      log.warn("Listener {} did not stop within {} (a server that does not answer?); closing its connections"
          + " under it: a lease it did not release expires on the store, and what it did not commit is"
          + " delivered again by the next owner", owners.get(late), listenersBound());
    }
  }

  /**
   * Closes the sinks and the source's clients side by side, waiting at most {@link
   * Wiring#CLOSE_BOUND} (docs/adr/0103). A sink's own close waits for its broker up to its flush
   * timeout (30 s: a Kafka producer's close waits for the records it still holds, and with a
   * blackholed broker that made a stop take 20-25 s); here it goes on on a daemon thread past the
   * bound. Nothing acknowledged is lost by it: the listeners are stopped, and a checkpoint moves
   * only past records the broker acknowledged, so what the broker did not acknowledge is delivered
   * again by the next owner.
   */
  private void closeSinksAndSource() {
    Map<String, Runnable> closes = new LinkedHashMap<>();
    Map<String, String> what = new HashMap<>();
    for (Wiring.SinkHandle<?> s : sinks) {
      String thread = "sluice-close-sink-" + closes.size();
      what.put(thread, s.description());
      closes.put(thread, () -> {
        try {
          s.close();
        } catch (RuntimeException e) {
          log.warn("{}", e.getMessage(), e);
        }
      });
    }
    closes.put("sluice-close-source", wiring::close); // bounded by CLOSE_BOUND itself, and says so
    for (String late : BoundedClose.run(Wiring.CLOSE_BOUND, closes)) {
      if (what.containsKey(late)) {
        log.warn("The sink to {} did not close within {} (the broker does not answer?); left to close on a daemon"
            + " thread: what it did not get acknowledged is delivered again from the checkpoint", what.get(late),
            Wiring.CLOSE_BOUND);
      }
    }
  }

  /** JVM and process meters (memory, GC, threads, classes, CPU, uptime, file descriptors). */
  private void bindProcessMeters() {
    new JvmMemoryMetrics().bindTo(meters);
    JvmGcMetrics gc = new JvmGcMetrics();
    gc.bindTo(meters);
    binders.add(gc);
    new JvmThreadMetrics().bindTo(meters);
    new ClassLoaderMetrics().bindTo(meters);
    new ProcessorMetrics().bindTo(meters);
    new UptimeMetrics().bindTo(meters);
    new FileDescriptorMetrics().bindTo(meters);
  }

  /**
   * Starts the HTTP endpoint (unless {@code http.enabled: false}), waits for the database, builds every
   * listener and sink of {@code config} and starts the listeners.
   *
   * @param registry where Sluice's meters go besides the endpoint's Prometheus registry
   */
  public static SluiceService start(SluiceConfig config, MeterRegistry registry) {
    SluiceService s = new SluiceService(config, registry);
    s.listeners.forEach(Listener::start);
    s.running = true;
    return s;
  }

  private void startHttp(SluiceConfig.HttpSection h) {
    if (!h.on()) {
      return;
    }
    http = HttpEndpoint.start(h.host(), h.portOrDefault(),
        ServiceHealth.of(wiring, entries, () -> running, prometheus));
    String where = url(http.address());
    log.info("HTTP endpoint on {} (/health/live, /health/ready, /status, /metrics)", where);
    System.out.println("http endpoint: " + where);
    if (!http.address().getAddress().isLoopbackAddress()) {
      log.warn("The HTTP endpoint listens on {} ({}), not only on this machine: /status and /metrics (host"
          + " names, process ids, checkpoints) are open to the network without authentication. Keep http.host"
          + " 127.0.0.1 and put a reverse proxy with authentication in front, or restrict the port with a"
          + " firewall", http.address().getAddress().getHostAddress(), where);
    }
  }

  /**
   * A URL a browser or {@code curl} can use for {@code address}: a wildcard address (listening on
   * every interface) is reached on this machine as 127.0.0.1, and an IPv6 address is bracketed.
   */
  static String url(java.net.InetSocketAddress address) {
    java.net.InetAddress ip = address.getAddress();
    String host;
    if (ip == null) {
      host = address.getHostString();
    } else if (ip.isAnyLocalAddress()) {
      host = "127.0.0.1";
    } else if (ip instanceof java.net.Inet6Address) {
      host = "[" + ip.getHostAddress() + "]";
    } else {
      host = ip.getHostAddress();
    }
    return "http://" + host + ":" + address.getPort();
  }

  /** Where the HTTP endpoint listens, if it is on. */
  public java.util.Optional<java.net.InetSocketAddress> httpAddress() {
    return java.util.Optional.ofNullable(http).map(HttpEndpoint::address);
  }

  public List<Listener<?>> listeners() {
    return List.copyOf(listeners);
  }

  public List<LeaseRecord> leases() {
    return wiring.leaseStore().list("");
  }

  /**
   * How long {@link #close()} waits for its listeners to stop (commit, release, leave the group):
   * twice the longest lease duration of its listeners, as long as a listener waits for a handler
   * call in progress. Past it, a lease that was not released expires on the store by itself
   * (docs/adr/0103).
   */
  Duration listenersBound() {
    return listeners.stream().map(l -> l.config().leaseDuration()).max(Duration::compareTo)
        .orElse(Duration.ZERO).multipliedBy(2);
  }

  /**
   * How long {@link #close()} takes at most while a server does not answer: the listeners' bound
   * ({@link #listenersBound()}) and then {@link Wiring#CLOSE_BOUND}, within which the sinks and the
   * source's clients close side by side (docs/adr/0103).
   */
  Duration closeBound() {
    return listenersBound().plus(Wiring.CLOSE_BOUND);
  }

  /**
   * Stops the listeners (committing and releasing), then closes the sinks and the source's
   * connections. Bounded while a server does not answer (docs/adr/0103): the listeners stop side by
   * side and are waited for at most {@link #listenersBound()}; a listener still stopping then (a call
   * to a blackholed server in flight) is left to finish on its own daemon thread while the sinks
   * and the clients close under it, so its remaining calls fail at once or within their own
   * bound, and the leases it did not release expire on the store. Nothing committed is lost: a
   * change whose checkpoint was not committed is delivered again by the next owner.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    stopListeners();
    if (http != null) {
      http.close();
    }
    closeSinksAndSource();
    for (AutoCloseable b : binders) {
      try {
        b.close();
      } catch (Exception e) {
        log.debug("closing a meter binder: {}", e.toString());
      }
    }
    prometheus.close();
  }
}
