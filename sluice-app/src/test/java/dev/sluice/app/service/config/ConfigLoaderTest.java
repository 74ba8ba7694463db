package dev.sluice.app.service.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.HistoryLostPolicy;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ConfigLoaderTest {
  private static final String VALID = """
      mongodb:
        uri: mongodb://localhost:27017
        database: shop
      listeners:
        - collection: orders
          partitions: 2
          leaseDuration: 5s
          checkpoint: { every: 50, maxDelay: 500ms, flushesInFlight: 0 }
          onHistoryLost: skip-to-latest
          onFailure: park
          retry: { attempts: 3, initialDelay: 100ms, maxDelay: 2s }
          sink:
            kafka: { bootstrapServers: "localhost:9092", topic: orders }
      """;

  @Test
  void aValidFileGivesTheConfiguredPolicies() {
    SluiceConfig c = ConfigLoader.parse(VALID, "sluice.yaml");
    SluiceConfig.ListenerSection l = c.listeners().get(0);
    assertThat(ConfigLoader.checkpoint(l, "x").maxChanges()).isEqualTo(50);
    assertThat(ConfigLoader.checkpoint(l, "x").maxDelay()).isEqualTo(Duration.ofMillis(500));
    assertThat(ConfigLoader.checkpoint(l, "x").flushesInFlight()).isZero();
    assertThat(ConfigLoader.leaseDuration(l, "x")).isEqualTo(Duration.ofSeconds(5));
    assertThat(ConfigLoader.historyLost(l, "x")).isEqualTo(HistoryLostPolicy.SKIP_TO_LATEST);
    assertThat(ConfigLoader.retry(l, "x").maxAttempts()).isEqualTo(3);
    SluiceConfig.ListenerSection repairing = ConfigLoader.parse(VALID.replace("onHistoryLost: skip-to-latest",
        "onHistoryLost: resnapshot\n    bootstrap: snapshot"), "sluice.yaml").listeners().get(0);
    assertThat(ConfigLoader.historyLost(repairing, "x")).isEqualTo(HistoryLostPolicy.RESNAPSHOT);
    assertThat(ConfigLoader.bootstrap(repairing, "x").startPoint()).isEqualTo(StartPoint.snapshot());
  }

  @Test
  void anUnknownKeyIsAnErrorNamingItsPath() {
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("every: 50", "evry: 50"), "sluice.yaml"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("sluice.yaml")
        .hasMessageContaining("listeners[0].checkpoint")
        .hasMessageContaining("evry");
  }

  /** Every setting of the listener API can be set in the file (ListenerSettings), checked by its rule. */
  @Test
  void theListenersTimingAndConcurrencySettingsAreReadAndCheckedByTheirRules() {
    SluiceConfig.ListenerSection l = ConfigLoader.parse(VALID.replace("leaseDuration: 5s",
        "leaseDuration: 6s\n    renewInterval: 1s\n    acquireInterval: 3s\n    pollWait: 100ms\n    concurrency: 2"),
        "sluice.yaml").listeners().get(0);
    assertThat(ConfigLoader.renewInterval(l, "x")).isEqualTo(Duration.ofSeconds(1));
    assertThat(ConfigLoader.acquireInterval(l, "x")).isEqualTo(Duration.ofSeconds(3));
    assertThat(ConfigLoader.pollWait(l, "x")).isEqualTo(Duration.ofMillis(100));
    assertThat(ConfigLoader.concurrency(l, "x")).isEqualTo(2);
    SluiceConfig.ListenerSection defaults = ConfigLoader.parse(VALID, "sluice.yaml").listeners().get(0);
    assertThat(ConfigLoader.renewInterval(defaults, "x")).as("the listener derives it from the lease").isNull();
    assertThat(ConfigLoader.concurrency(defaults, "x")).isEqualTo(1);
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("leaseDuration: 5s", "leaseDuration: 5s\n    concurrency: 0"),
        "sluice.yaml")).hasMessageContaining("sluice.yaml: listeners[0].concurrency: must be in [1, 256], but was 0");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("leaseDuration: 5s", "leaseDuration: 500ms"),
        "sluice.yaml")).hasMessageContaining("sluice.yaml: listeners[0].leaseDuration: must be at least 1s, but was PT0.5S");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("leaseDuration: 5s", "leaseDuration: 5s\n    pollWait: 0s"),
        "sluice.yaml")).hasMessageContaining("sluice.yaml: listeners[0].pollWait: must be positive, but was PT0S");
  }

  @Test
  void aBadValueIsAnErrorNamingThePathAndTheValue() {
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("every: 50", "every: 0"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].checkpoint").hasMessageContaining("maxChanges").hasMessageContaining("0");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("flushesInFlight: 0", "flushesInFlight: -1"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].checkpoint").hasMessageContaining("flushesInFlight").hasMessageContaining("-1");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("500ms", "half a second"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].checkpoint.maxDelay").hasMessageContaining("'half a second'");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("skip-to-latest", "ignore"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].onHistoryLost").hasMessageContaining("'ignore'")
        .hasMessageContaining("stop, skip-to-latest or resnapshot");
    String invalidate = VALID.replace("onFailure: park", "onFailure: park\n    onInvalidate: restart");
    assertThatThrownBy(() -> ConfigLoader.parse(invalidate, "sluice.yaml"))
        .hasMessageContaining("listeners[0].onInvalidate").hasMessageContaining("stop or start-after")
        .hasMessageContaining("'restart'");
    SluiceConfig.ListenerSection startAfter =
        ConfigLoader.parse(invalidate.replace("restart", "start-after"), "sluice.yaml").listeners().get(0);
    assertThat(ConfigLoader.onInvalidate(startAfter, "x")).isEqualTo(dev.sluice.mongodb.feed.MongoChangeFeed.OnInvalidate.START_AFTER);
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("partitions: 2", "partitions: two"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].partitions");
    assertThat(ConfigLoader.parse(VALID.replace("partitions: 2", "partitions: 2\n    threads: 8"), "sluice.yaml")
        .listeners().get(0).threads()).isEqualTo(8);
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("partitions: 2", "partitions: 2\n    threads: 0"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].threads").hasMessageContaining("must be in [1, 4096], but was 0");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("mongodb://localhost:27017", "localhost"), "sluice.yaml"))
        .hasMessageContaining("mongodb.uri").hasMessageContaining("'localhost'");
    String events = VALID.replace("topic: orders }", "topic: orders }\n      publish: { mode: domain-events, field: lastEvent, onMissing: drop }");
    assertThatThrownBy(() -> ConfigLoader.parse(events, "sluice.yaml"))
        .hasMessageContaining("listeners[0].sink.publish.onMissing").hasMessageContaining("count or park")
        .hasMessageContaining("'drop'");
    assertThat(ConfigLoader.parse(events.replace("drop", "park"), "sluice.yaml").listeners().get(0).sink().publish().onMissing())
        .isEqualTo("park");
  }

  @Test
  void theHttpSectionDefaultsToLoopbackAndRefusesImpossibleValuesNamingThem() {
    SluiceConfig.HttpSection defaults = ConfigLoader.parse(VALID, "sluice.yaml").httpOrDefault();
    assertThat(defaults.on()).isTrue();
    assertThat(defaults.host()).isEqualTo("127.0.0.1");
    assertThat(defaults.portOrDefault()).isEqualTo(SluiceConfig.HttpSection.DEFAULT_PORT);
    SluiceConfig.HttpSection set = ConfigLoader.parse(VALID + "http: { address: 0.0.0.0, port: 8081 }\n", "sluice.yaml").httpOrDefault();
    assertThat(set.host()).isEqualTo("0.0.0.0");
    assertThat(set.portOrDefault()).isEqualTo(8081);
    assertThat(ConfigLoader.parse(VALID + "http: { enabled: false }\n", "sluice.yaml").httpOrDefault().on()).isFalse();

    assertThatThrownBy(() -> ConfigLoader.parse(VALID + "http: { port: 70000 }\n", "sluice.yaml"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("http.port").hasMessageContaining("70000");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID + "http: { port: -1 }\n", "sluice.yaml"))
        .hasMessageContaining("http.port").hasMessageContaining("-1");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID + "http: { address: \"my host!\" }\n", "sluice.yaml"))
        .hasMessageContaining("http.address").hasMessageContaining("'my host!'");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID + "http: { prot: 8081 }\n", "sluice.yaml"))
        .hasMessageContaining("http").hasMessageContaining("prot");
  }

  @Test
  void environmentVariablesAreSubstitutedWithDefaults() {
    java.util.Map<String, String> env = java.util.Map.of("MONGO_URI", "mongodb://app:pw@db1/", "EMPTY", "");
    SluiceConfig c = ConfigLoader.parse(VALID.replace("mongodb://localhost:27017", "\"${MONGO_URI}\"")
        .replace("database: shop", "database: ${DB:-shop_eu}").replace("topic: orders", "topic: ${EMPTY:-orders_eu}"),
        "sluice.yaml", env::get);
    assertThat(c.mongodb().uri()).isEqualTo("mongodb://app:pw@db1/");
    assertThat(c.mongodb().database()).as("unset: the default").isEqualTo("shop_eu");
    assertThat(c.listeners().get(0).sink().kafka().topic()).as("empty: the default").isEqualTo("orders_eu");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("database: shop", "database: ${DB}"), "sluice.yaml", env::get))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("sluice.yaml:3:13")
        .hasMessageContaining("environment variable DB is not set");
  }

  @Test
  void missingOrDoubleSinksAreRejected() {
    String noSink = VALID.substring(0, VALID.indexOf("    sink:"));
    assertThatThrownBy(() -> ConfigLoader.parse(noSink, "s.yaml")).hasMessageContaining("listeners[0].sink").hasMessageContaining("required");
    String two = VALID + "      amqp: { uri: amqp://localhost, exchange: orders }\n";
    assertThatThrownBy(() -> ConfigLoader.parse(two, "s.yaml")).hasMessageContaining("exactly one");
  }

  @Test
  void brokenYamlAndMissingFilesGiveClearErrors() {
    assertThatThrownBy(() -> ConfigLoader.parse("mongodb: [unclosed", "s.yaml"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("s.yaml");
    assertThatThrownBy(() -> ConfigLoader.parse("", "s.yaml")).hasMessageContaining("empty");
    assertThatThrownBy(() -> ConfigLoader.load(Path.of("/nonexistent/sluice.yaml")))
        .hasMessageContaining("/nonexistent/sluice.yaml").hasMessageContaining("does not exist");
  }

  private static final String TWO_ON_ORDERS = """
      mongodb:
        uri: mongodb://localhost:27017
        database: shop
      listeners:
        - collection: orders
          sink:
            kafka: { bootstrapServers: "localhost:9092", topic: orders }
        - collection: orders
          sink:
            amqp: { uri: "amqp://localhost", exchange: "shop/events" }
      """;

  @Test
  void theGroupIsDerivedFromTheDestinationUnlessSet() {
    SluiceConfig c = ConfigLoader.parse(TWO_ON_ORDERS, "sluice.yaml");
    assertThat(ConfigLoader.group(c.listeners().get(0), "x")).isEqualTo("kafka-orders");
    assertThat(ConfigLoader.group(c.listeners().get(1), "x")).isEqualTo("amqp-shop_events");
    SluiceConfig named = ConfigLoader.parse(TWO_ON_ORDERS.replace(
        "    sink:\n      amqp", "    group: invalidator\n    sink:\n      amqp"), "sluice.yaml");
    assertThat(ConfigLoader.group(named.listeners().get(1), "x")).isEqualTo("invalidator");
  }

  @Test
  void twoEntriesReadingOneCollectionAsOneGroupAreRefusedNamingBoth() {
    String same = TWO_ON_ORDERS.replace("amqp: { uri: \"amqp://localhost\", exchange: \"shop/events\" }",
        "kafka: { bootstrapServers: \"other:9092\", topic: orders }");
    assertThatThrownBy(() -> ConfigLoader.parse(same, "sluice.yaml"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("listeners[0] and listeners[1]")
        .hasMessageContaining("collection 'orders'")
        .hasMessageContaining("consumer group 'kafka-orders'")
        .hasMessageContaining("another 'group'");
    String explicit = TWO_ON_ORDERS.replace("    sink:\n", "    group: indexer\n    sink:\n");
    assertThatThrownBy(() -> ConfigLoader.parse(explicit, "sluice.yaml"))
        .hasMessageContaining("listeners[0] and listeners[1]").hasMessageContaining("'indexer'");
  }

  @Test
  void anInvalidGroupOrLegacySettingIsRefusedNamingTheEntry() {
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("partitions: 2", "group: \"my group\"\n    partitions: 2"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].group").hasMessageContaining("'my group'")
        .hasMessageContaining("letters, digits");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("partitions: 2", "legacyCheckpoints: adopt\n    partitions: 2"), "sluice.yaml"))
        .hasMessageContaining("listeners[0].legacyCheckpoints").hasMessageContaining("'adopt'");
  }

  @Test
  void eachSettingIsParsedOnceSoValidationAndWiringAgree() {
    // Before: " Park " passed validation (trimmed) and was wired as block (not trimmed).
    SluiceConfig.ListenerSection padded = ConfigLoader.parse(VALID.replace("onFailure: park", "onFailure: \" Park \""),
        "sluice.yaml").listeners().get(0);
    assertThat(ConfigLoader.parks(padded, "x")).isTrue();
    String events = VALID.replace("topic: orders }", "topic: orders }\n      publish: { mode: \" Domain-Events \", field: lastEvent, onMissing: \" PARK \" }");
    assertThat(ConfigLoader.publication(ConfigLoader.parse(events, "sluice.yaml").listeners().get(0), "x"))
        .isEqualTo(new dev.sluice.sink.Publication.DomainEvents("lastEvent", "id", dev.sluice.sink.Publication.MissingEvent.PARK));
  }

  @Test
  void aKeyGivenTwiceAFractionForAnIntegerAndAPublishSectionWithoutModeAreErrorsNamingThem() {
    // Before: the last of two keys won silently, partitions: 1.9 ran as 1, and publish without
    // mode ended in a NullPointerException while wiring.
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("partitions: 2", "partitions: 2\n    partitions: 3"), "sluice.yaml"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("sluice.yaml").hasMessageContaining("partitions");
    assertThatThrownBy(() -> ConfigLoader.parse(VALID.replace("partitions: 2", "partitions: 1.9"), "sluice.yaml"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("listeners[0].partitions");
    String noMode = VALID.replace("topic: orders }", "topic: orders }\n      publish: { field: lastEvent }");
    assertThatThrownBy(() -> ConfigLoader.parse(noMode, "sluice.yaml"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("listeners[0].sink.publish.mode")
        .hasMessageContaining("is required");
  }
}
