package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoCollection;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.net.FaultProxy;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 37 item 5: stopping the service while sends to a Kafka broker that does not answer are in
 * flight (the broker blackholed through the {@link FaultProxy} it advertises, so every connection
 * of the producer goes through it) ends within {@link SluiceService#closeBound()}: before, the
 * producer's close waited for the records it held up to the 30 s flush timeout (a stop took
 * 20-25 s). Nothing acknowledged is lost: the checkpoint did not move past the records the broker
 * did not acknowledge, and the next run delivers them.
 */
class KafkaBlackholeStopTest {
  /** What a loaded build machine may add to a bound. */
  private static final Duration SLACK = Duration.ofSeconds(3);
  private static InMemoryMongo mongo;
  private static EmbeddedKafka kafka;
  @TempDir Path dir;

  @BeforeAll
  static void servers() {
    mongo = new InMemoryMongo();
    kafka = EmbeddedKafka.startBehindProxy(Duration.ofMinutes(5));
  }

  @AfterAll
  static void stopServers() {
    kafka.close();
    mongo.close();
  }

  @Test
  void aStopWhileSendsToABlackholedBrokerAreInFlightEndsWithinTheBoundAndLosesNothing() throws Exception {
    String shop = mongo.freshDatabase().getName();
    String topic = "orders-" + shop;
    kafka.createTopic(topic, 1);
    FaultProxy proxy = kafka.proxy();
    MongoCollection<Document> orders = mongo.client().getDatabase(shop).getCollection("orders");
    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        mongodb:
          uri: "%s"
          database: %s
        http: { enabled: false }
        listeners:
          - collection: orders
            leaseDuration: 2s
            checkpoint: { every: 1, maxDelay: 100ms }
            sink:
              kafka: { bootstrapServers: "%s", topic: %s }
        """.formatted(mongo.uri(), shop, kafka.bootstrapServers(), topic));
    long acceptedBefore = proxy.connectionsAccepted();
    SimpleMeterRegistry meters = new SimpleMeterRegistry();
    SluiceService service = SluiceService.start(ConfigLoader.load(config), meters);
    try {
      insert(orders, 0, 5);
      await().atMost(Duration.ofSeconds(30)).until(() -> keys(topic, 5).size() == 5);

      proxy.blackhole(Duration.ofSeconds(60));
      insert(orders, 5, 10);
      // Handed to the producer, which holds them: the broker never acknowledges them.
      await().atMost(Duration.ofSeconds(20)).until(() -> delivered(meters) >= 10);
    } finally {
      long closing = System.nanoTime();
      service.close();
      Duration took = Duration.ofNanos(System.nanoTime() - closing);
      System.out.println("KafkaBlackholeStopTest: close took " + took.toMillis() + " ms with Kafka blackholed");
      assertThat(took).as("the service's close with sends to a blackholed broker in flight")
          .isLessThanOrEqualTo(service.closeBound().plus(SLACK));
      proxy.pass();
    }
    assertThat(proxy.connectionsAccepted()).as("the producer reached Kafka through the proxy")
        .isGreaterThan(acceptedBefore);
    long firstEpoch = epochs(topic).get("o0").iterator().next();

    // The checkpoint did not move past what the broker had not acknowledged: the next run (a new
    // epoch) delivers those changes again. (The first run's producer, left closing in the
    // background, may deliver them too once the proxy passes: at least once.)
    try (SluiceService again = SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry())) {
      await().atMost(Duration.ofSeconds(60)).until(() -> {
        java.util.Map<String, Set<Long>> epochs = epochs(topic);
        return java.util.stream.IntStream.range(5, 10).allMatch(i ->
            epochs.getOrDefault("o" + i, Set.of()).stream().anyMatch(e -> e > firstEpoch));
      });
    }
  }

  /** The fence epochs of the records in {@code topic}, by key. */
  private static java.util.Map<String, Set<Long>> epochs(String topic) {
    java.util.Map<String, Set<Long>> epochs = new java.util.HashMap<>();
    kafka.readAll(topic, Integer.MAX_VALUE, Duration.ofSeconds(2)).forEach(r -> epochs
        .computeIfAbsent(new String(r.key(), StandardCharsets.UTF_8), k -> new HashSet<>())
        .add(Long.parseLong(new String(
            r.headers().lastHeader(dev.sluice.sink.Envelope.HEADER_FENCE_EPOCH).value(), StandardCharsets.UTF_8))));
    return epochs;
  }

  private static double delivered(SimpleMeterRegistry meters) {
    return meters.find("sluice.changes.delivered").counters().stream().mapToDouble(Counter::count).sum();
  }

  private static void insert(MongoCollection<Document> orders, int from, int to) {
    for (int i = from; i < to; i++) {
      orders.insertOne(new Document("_id", "o" + i));
    }
  }

  private static Set<String> keys(String topic, int count) {
    Set<String> keys = new HashSet<>();
    kafka.readAll(topic, count, Duration.ofSeconds(2))
        .forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
    return keys;
  }
}
