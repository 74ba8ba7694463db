package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerConfig;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * What the file says about a listener's timing and concurrency reaches the listener the service
 * builds (ListenerSettings, ADR 0116): before, concurrency, renewInterval, acquireInterval and
 * pollWait could not be set in the file at all. The listener is built, not started.
 */
class WiringSettingsTest {

  @Test
  void theListenersTimingAndConcurrencyFromTheFileReachTheListener() {
    try (InMemoryMongo mongo = new InMemoryMongo()) {
      String yaml = """
          mongodb:
            uri: %s
            database: %s
          listeners:
            - collection: orders
              leaseDuration: 6s
              renewInterval: 1s
              acquireInterval: 2s
              pollWait: 100ms
              concurrency: 3
              sink:
                kafka: { bootstrapServers: "localhost:9", topic: orders }
            - collection: orders
              group: with-defaults
              sink:
                kafka: { bootstrapServers: "localhost:9", topic: orders }
          """.formatted(mongo.uri(), mongo.freshDatabase().getName());
      SluiceConfig config = ConfigLoader.parse(yaml, "sluice.yaml");
      Wiring<?> wiring = Wiring.connect(config, false);
      try {
        ListenerConfig<?> set = built(wiring, config.listeners().get(0)).config();
        assertThat(set.leaseDuration()).isEqualTo(Duration.ofSeconds(6));
        assertThat(set.renewInterval()).isEqualTo(Duration.ofSeconds(1));
        assertThat(set.acquireInterval()).isEqualTo(Duration.ofSeconds(2));
        assertThat(set.pollWait()).isEqualTo(Duration.ofMillis(100));
        assertThat(set.concurrency()).isEqualTo(3);

        ListenerConfig<?> defaults = built(wiring, config.listeners().get(1)).config();
        assertThat(defaults.leaseDuration()).isEqualTo(Duration.ofSeconds(10));
        assertThat(defaults.renewInterval()).as("a third of the lease").isEqualTo(defaults.leaseDuration().dividedBy(3));
        assertThat(defaults.acquireInterval()).isEqualTo(defaults.renewInterval());
        assertThat(defaults.concurrency()).isEqualTo(1);
      } finally {
        wiring.close();
      }
    }
  }

  /** The listener of {@code entry}, with a handler that takes concurrent calls (the sinks do not). */
  private static <D> Listener<D> built(Wiring<D> wiring, SluiceConfig.ListenerSection entry) {
    return wiring.listener(entry, (change, fence) -> { }, ListenerObserver.NOOP);
  }
}
