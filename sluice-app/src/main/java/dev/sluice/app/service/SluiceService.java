package dev.sluice.app.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.app.config.SluiceConfig;
import dev.sluice.app.config.SluiceConfig.ListenerSection;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.metrics.MicrometerObserver;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.ArrayList;
import java.util.List;
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
    this.client = MongoClients.create(config.mongodb().uri());
    this.wiring = new Wiring(config, client);
    try {
      for (ListenerSection l : config.listeners()) {
        wiring.checkLegacyCheckpoints(l);
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
