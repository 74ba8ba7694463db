package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.ConfigurationException;
import dev.sluice.app.Main;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The service as an operator runs it: a YAML file, an embedded MongoDB (or a real deployment with
 * {@code -Dsluice.mongodb.uri}, a fresh database per test) and Kafka. A document too large for the
 * broker is refused, retried, parked with its error while the other documents flow, and the CLI
 * lists it.
 */
class SluiceServiceTest {
  @TempDir Path dir;

  @Test
  void relaysACollectionToKafkaAndParksWhatTheBrokerRefuses() throws Exception {
    try (InMemoryMongo mongo = new InMemoryMongo(); EmbeddedKafka kafka = EmbeddedKafka.start()) {
      MongoClient client = mongo.client();
      String shop = mongo.freshDatabase().getName();
      kafka.createTopic("orders", 1);
      Path config = dir.resolve("sluice.yaml");
      Files.writeString(config, """
          mongodb:
            uri: %s
            database: %s
          http: { port: 0 }
          listeners:
            - collection: orders
              leaseDuration: 3s
              checkpoint: { every: 20, maxDelay: 200ms }
              onFailure: park
              retry: { attempts: 2, initialDelay: 50ms, maxDelay: 100ms }
              sink:
                kafka: { bootstrapServers: "%s", topic: orders }
          """.formatted(mongo.uri(), shop, kafka.bootstrapServers()));
      MongoCollection<Document> orders = client.getDatabase(shop).getCollection("orders");

      try (SluiceService service = SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry())) {
        for (int i = 0; i < 50; i++) {
          orders.insertOne(new Document("_id", "o" + i).append("n", i));
        }
        // Larger than the producer's max.request.size (1 MB): Kafka refuses it for good.
        orders.insertOne(new Document("_id", "huge").append("blob", "x".repeat(1_500_000)));
        for (int i = 50; i < 60; i++) {
          orders.insertOne(new Document("_id", "o" + i).append("n", i));
        }

        List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll("orders", 60, Duration.ofSeconds(60));
        Set<String> keys = new HashSet<>();
        records.forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
        for (int i = 0; i < 60; i++) {
          assertThat(keys).contains("o" + i);
        }
        assertThat(keys).doesNotContain("huge");
        await().atMost(Duration.ofSeconds(30)).until(() ->
            client.getDatabase(shop).getCollection(Wiring.DEFAULT_DEAD_LETTERS).countDocuments() == 1);
      }

      ByteArrayOutputStream out = new ByteArrayOutputStream();
      PrintStream original = System.out;
      int code;
      try {
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        code = Main.commandLine().execute("dead-letters", "list", "--config", config.toString(),
            "--collection", "orders");
      } finally {
        System.setOut(original);
      }
      String listed = out.toString(StandardCharsets.UTF_8);
      assertThat(code).isZero();
      assertThat(listed).contains("1 parked change(s) in kafka-orders/" + shop + ".orders").contains("key=huge").contains("attempts=2")
          .contains("MessageEncodingException").contains("more than max.request.size");
    }
  }

  @Test
  void twoEntriesOnOneCollectionWithDifferentDestinationsEachRelayEveryChange() throws Exception {
    try (InMemoryMongo mongo = new InMemoryMongo(); EmbeddedKafka kafka = EmbeddedKafka.start()) {
      MongoClient client = mongo.client();
      String shop = mongo.freshDatabase().getName();
      kafka.createTopic("indexer", 1);
      kafka.createTopic("cache", 1);
      Path config = dir.resolve("two.yaml");
      Files.writeString(config, """
          mongodb:
            uri: %1$s
            database: %2$s
          http: { port: 0 }
          listeners:
            - collection: orders
              partitions: 4
              threads: 2
              leaseDuration: 3s
              checkpoint: { every: 50, maxDelay: 200ms }
              sink:
                kafka: { bootstrapServers: "%3$s", topic: indexer }
            - collection: orders
              leaseDuration: 3s
              checkpoint: { every: 50, maxDelay: 200ms }
              sink:
                kafka: { bootstrapServers: "%3$s", topic: cache }
          """.formatted(mongo.uri(), shop, kafka.bootstrapServers()));
      MongoCollection<Document> orders = client.getDatabase(shop).getCollection("orders");

      try (SluiceService service = SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry())) {
        for (int i = 0; i < 300; i++) {
          orders.insertOne(new Document("_id", "o" + i).append("n", i));
        }
        Set<String> expected = new HashSet<>();
        for (int i = 0; i < 300; i++) {
          expected.add("o" + i);
        }
        for (String topic : List.of("indexer", "cache")) {
          Set<String> keys = new HashSet<>();
          kafka.readAll(topic, 300, Duration.ofSeconds(60))
              .forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
          assertThat(keys).as("keys relayed to topic %s", topic).isEqualTo(expected);
        }
        assertThat(service.leases()).extracting(r -> r.name())
            .contains("kafka-indexer/" + shop + ".orders#3of4", "kafka-cache/" + shop + ".orders#0of1");
        // 4 partitions taking turns on the 2 threads the entry gives them; the other entry's default.
        assertThat(service.listeners()).extracting(l -> l.config().threads()).containsExactly(2, 1);
      }

      // The current state of every document, replayed to another topic, names the entry by group.
      kafka.createTopic("orders-now", 1);
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      PrintStream original = System.out;
      int code;
      try {
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        code = Main.commandLine().execute("replay", "--config", config.toString(), "--collection", "orders",
            "--group", "kafka-indexer", "--from", "current", "--to", "orders-now");
      } finally {
        System.setOut(original);
      }
      assertThat(code).isZero();
      assertThat(out.toString(StandardCharsets.UTF_8)).contains("replayed the current state, 300 document(s)");
      List<ConsumerRecord<byte[], byte[]>> now = kafka.readAll("orders-now", 300, Duration.ofSeconds(30));
      Set<String> replayed = new HashSet<>();
      now.forEach(r -> replayed.add(new String(r.key(), StandardCharsets.UTF_8)));
      assertThat(replayed).hasSize(300).contains("o0", "o299");
      assertThat(now).allSatisfy(r -> assertThat(dev.sluice.sink.Envelope.parse(r.value()).operation())
          .isEqualTo("SNAPSHOT"));
    }
  }

  @Test
  void checkpointsFromBeforeConsumerGroupsStopTheStartUnlessIgnored() throws Exception {
    try (InMemoryMongo mongo = new InMemoryMongo()) {
      MongoClient client = mongo.client();
      String shop = mongo.freshDatabase().getName();
      LeaseStore leases = MongoLeaseStore.builder(client.getDatabase(shop)).build();
      Lease old = leases.tryAcquire(shop + ".orders#0", "relay-1", Duration.ofSeconds(5)).orElseThrow();
      leases.release(leases.commit(old, Position.of("{\"_data\": \"8265A1\"}")));
      String yaml = """
          mongodb:
            uri: %s
            database: %s
          http: { port: 0 }
          listeners:
            - collection: orders
              leaseDuration: 3s
              sink:
                kafka: { bootstrapServers: "localhost:9", topic: orders }
          """.formatted(mongo.uri(), shop);
      Path refuse = dir.resolve("refuse.yaml");
      Files.writeString(refuse, yaml);

      assertThatThrownBy(() -> SluiceService.start(ConfigLoader.load(refuse), new SimpleMeterRegistry()))
          .isInstanceOf(ConfigurationException.class)
          .hasMessageContaining("listeners[0]").hasMessageContaining(shop + ".orders#0")
          .hasMessageContaining("before consumer groups").hasMessageContaining("legacyCheckpoints: ignore")
          .hasMessageContaining("kafka-orders")
          .hasMessageContaining("docs/upgrading.md");

      Path ignore = dir.resolve("ignore.yaml");
      Files.writeString(ignore, yaml.replace("leaseDuration: 3s", "leaseDuration: 3s\n    legacyCheckpoints: ignore"));
      try (SluiceService service = SluiceService.start(ConfigLoader.load(ignore), new SimpleMeterRegistry())) {
        await().atMost(Duration.ofSeconds(30)).until(() -> service.leases().stream()
            .anyMatch(r -> r.name().equals("kafka-orders/" + shop + ".orders#0of1") && r.isHeld()));
        String status = StatusCommand.format(service.leases());
        assertThat(status).contains("legacy").contains("partition").contains("kafka-orders");
      }
    }
  }
}
