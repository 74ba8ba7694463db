package dev.sluice.spring.boot;

import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionStatus;
import java.util.List;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;

/**
 * One declared listener as a bean of the application context: started once the context is
 * refreshed, stopped when it closes. Stopping closes the {@link Listener}: it finishes the handler
 * call in progress, commits what was processed and releases its leases, so an instance still
 * running takes the partitions over at once rather than after the lease expired.
 *
 * <p>Phase {@link #PHASE}: started after the beans of lower phases (a web server among them),
 * stopped before them, so no change is handled while the beans a handler uses are shut down.
 */
public final class SluiceListenerContainer implements SmartLifecycle {
  private static final Logger log = LoggerFactory.getLogger(SluiceListenerContainer.class);

  /**
   * {@code Integer.MAX_VALUE - 100}: late among {@link SmartLifecycle} beans, as message listener
   * containers are (Spring for Apache Kafka uses the same value).
   */
  public static final int PHASE = Integer.MAX_VALUE - 100;

  private final String name;
  private final Supplier<Listener<?>> factory;
  private final boolean autoStartup;
  private volatile Listener<?> listener;
  private volatile boolean running;
  private volatile boolean used;

  /**
   * @param factory builds the listener; called once here (so a bad configuration fails the context
   *     refresh, before anything starts) and again for each start after a stop
   */
  SluiceListenerContainer(String name, Supplier<Listener<?>> factory, boolean autoStartup) {
    this.name = name;
    this.factory = factory;
    this.autoStartup = autoStartup;
    this.listener = factory.get();
  }

  /** The listener's name (its key under {@code sluice.listeners}). */
  public String name() {
    return name;
  }

  /** The listener; a new one after each stop and start. */
  public Listener<?> listener() {
    return listener;
  }

  /** One status per partition, as this instance sees it. */
  public List<PartitionStatus> status() {
    return listener.status();
  }

  @Override
  public synchronized void start() {
    if (running) {
      return;
    }
    if (used) {
      listener = factory.get();
    }
    used = true;
    listener.start();
    running = true;
    log.info("Sluice listener '{}' started: group {}, stream {}, {} partition(s), owner {}", name,
        listener.config().group(), listener.config().feed().stream(), listener.config().partitions(),
        listener.owner());
  }

  @Override
  public synchronized void stop() {
    if (!running) {
      return;
    }
    running = false;
    listener.close();
    log.info("Sluice listener '{}' stopped: processed changes committed, leases released", name);
  }

  /** Closes on a thread of its own, so that the context's listeners hand their leases over in parallel. */
  @Override
  public void stop(Runnable callback) {
    Thread t = new Thread(() -> {
      try {
        stop();
      } finally {
        callback.run();
      }
    }, "sluice-stop-" + name);
    t.setDaemon(true);
    t.start();
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public boolean isAutoStartup() {
    return autoStartup;
  }

  @Override
  public int getPhase() {
    return PHASE;
  }

  @Override
  public String toString() {
    return "SluiceListenerContainer[" + name + "]";
  }
}
