package dev.sluice.app.service;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.ConfigurationException;
import dev.sluice.app.config.SluiceConfig.ListenerSection;
import dev.sluice.app.config.SluiceConfig;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.metrics.MicrometerObserver;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The running service: one listener per configured collection, each relaying to its sink. */
public final class SluiceService implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(SluiceService.class);

  private final MongoClient client;
  private final Wiring wiring;
  private final List<Wiring.SinkHandle> sinks = new ArrayList<>();
  private final List<Listener<BsonDocument>> listeners = new ArrayList<>();
  private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

  private SluiceService(SluiceConfig config, MeterRegistry registry) {
    this.client = MongoClients.create(clientSettings(config.mongodb().uri()));
    this.wiring = new Wiring(config, client);
    try {
      for (ListenerSection l : config.listeners()) {
        awaitReachable("check the records of " + config.mongodb().database() + "." + l.collection(),
            () -> wiring.checkLegacyCheckpoints(l));
      }
      for (ListenerSection l : config.listeners()) {
        Wiring.SinkHandle sink = wiring.sink(l, null);
        sinks.add(sink);
        Listener<BsonDocument> listener = wiring.listener(l, sink.handler(),
            ListenerObserver.composite(new MicrometerObserver(registry)));
        listeners.add(listener);
        log.info("Relaying {}.{} to {} as {}", config.mongodb().database(), l.collection(), sink.description(), listener.owner());
      }
    } catch (RuntimeException e) {
      close();
      throw e;
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
   * Runs {@code step} until MongoDB answers it: an unreachable database at start is waited for
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
        log.warn("Waiting for MongoDB to {}: {}; retrying in {} ms", what, oneLine(e), backoffMillis);
        System.out.println("waiting for MongoDB: " + oneLine(e));
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

  /** The message of {@code e} and its causes on one line, without stack traces. */
  static String oneLine(Throwable e) {
    StringBuilder out = new StringBuilder();
    for (Throwable t = e; t != null && out.length() < 400; t = t.getCause() == t ? null : t.getCause()) {
      if (out.length() > 0) {
        out.append(" <- ");
      }
      out.append(t.getClass().getSimpleName()).append(": ").append(String.valueOf(t.getMessage()).replace('\n', ' '));
    }
    return out.length() > 400 ? out.substring(0, 400) + "..." : out.toString();
  }

  /** Builds every listener and sink of {@code config} and starts the listeners. */
  public static SluiceService start(SluiceConfig config, MeterRegistry registry) {
    SluiceService s = new SluiceService(config, registry);
    s.listeners.forEach(Listener::start);
    return s;
  }

  public List<Listener<BsonDocument>> listeners() {
    return List.copyOf(listeners);
  }

  public List<LeaseRecord> leases() {
    return wiring.leaseStore().list("");
  }

  /** Stops the listeners (committing and releasing), then closes the sinks and the client. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    listeners.forEach(Listener::close);
    for (Wiring.SinkHandle s : sinks) {
      try {
        s.close();
      } catch (RuntimeException e) {
        log.warn("{}", e.getMessage(), e);
      }
    }
    client.close();
  }
}
