package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.app.Main;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 12, bad input that only shows with data and servers: a document whose domain events cannot
 * be read is parked with a message naming the field while the others flow (nothing lost: relayed
 * plus parked is what was written), and a broker that refuses the credentials is a one-line error
 * with exit code 4 for a command, and "not ready" naming the refusal for a running service, with
 * the password masked in both.
 */
class BadDataAndCredentialsTest {
  @TempDir Path dir;

  @Test
  void aDocumentWithUnreadableDomainEventsIsParkedNamingTheFieldAndTheOthersAreRelayed() throws Exception {
    try (InMemoryMongo mongo = new InMemoryMongo(); EmbeddedKafka kafka = EmbeddedKafka.start()) {
      MongoClient client = mongo.client();
      String shop = mongo.freshDatabase().getName();
      kafka.createTopic("events", 1);
      Path config = dir.resolve("sluice.yaml");
      Files.writeString(config, """
          mongodb:
            uri: %s
            database: %s
          http: { enabled: false }
          listeners:
            - collection: accounts
              leaseDuration: 3s
              checkpoint: { every: 20, maxDelay: 200ms }
              onFailure: park
              retry: { attempts: 2, initialDelay: 50ms, maxDelay: 100ms }
              sink:
                kafka: { bootstrapServers: "%s", topic: events }
                publish: { mode: domain-events, field: events, onMissing: park }
          """.formatted(mongo.uri(), shop, kafka.bootstrapServers()));
      MongoCollection<Document> accounts = client.getDatabase(shop).getCollection("accounts");
      try (SluiceService service = SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry())) {
        Set<String> written = new HashSet<>();
        for (int i = 0; i < 10; i++) {
          accounts.insertOne(new Document("_id", "a" + i)
              .append("events", List.of(new Document("id", "e" + i).append("type", "Opened"))));
          written.add("a" + i);
          if (i == 4) {
            accounts.insertOne(new Document("_id", "bad").append("events", 42));
            written.add("bad");
          }
        }
        await().atMost(Duration.ofSeconds(60)).until(() -> relayedKeys(kafka, 10).size() == 10
            && client.getDatabase(shop).getCollection(Wiring.DEFAULT_DEAD_LETTERS).countDocuments() == 1);
        Set<String> relayedOrParked = new HashSet<>(relayedKeys(kafka, 10));
        Document parked = client.getDatabase(shop).getCollection(Wiring.DEFAULT_DEAD_LETTERS).find().first();
        assertThat(parked.toJson()).contains("field 'events' must hold an object or an array of objects");
        relayedOrParked.add("bad");
        assertThat(relayedOrParked).as("nothing lost: relayed plus parked").isEqualTo(written);
        assertThat(relayedKeys(kafka, 10)).doesNotContain("bad");
      }
    }
  }

  @Test
  void aBrokerThatRefusesTheCredentialsIsOneLineWithExitCode4AndNotReadyForARunningService() throws Exception {
    try (InMemoryMongo mongo = new InMemoryMongo(); EmbeddedAmqpBroker amqp = EmbeddedAmqpBroker.start()) {
      MongoClient client = mongo.client();
      String shop = mongo.freshDatabase().getName();
      client.getDatabase(shop).getCollection("orders").insertOne(new Document("_id", "o1"));
      String wrong = "amqp://" + EmbeddedAmqpBroker.USER + ":n0tThePassw0rd@127.0.0.1:" + amqp.port();
      Path config = dir.resolve("sluice-amqp.yaml");
      Files.writeString(config, """
          mongodb:
            uri: %s
            database: %s
          http: { port: 0 }
          listeners:
            - collection: orders
              leaseDuration: 3s
              sink:
                amqp: { uri: "%s", exchange: orders }
          """.formatted(mongo.uri(), shop, wrong));

      StringWriter err = new StringWriter();
      int exit = Main.commandLine().setErr(new PrintWriter(err)).execute("replay", "--config", config.toString(),
          "--collection", "orders", "--from", "oldest", "--to", "orders-replay");
      assertThat(exit).as("stderr: %s", err).isEqualTo(Main.EXIT_UNREACHABLE);
      assertThat(err.toString().strip().lines()).hasSize(1);
      assertThat(err.toString()).containsIgnoringCase("refused")
          .doesNotContain("n0tThePassw0rd");

      try (SluiceService service = SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry())) {
        String base = "http://127.0.0.1:" + service.httpAddress().orElseThrow().getPort();
        HttpClient http = HttpClient.newHttpClient();
        await().atMost(Duration.ofSeconds(60)).until(() -> {
          HttpResponse<String> ready = http.send(HttpRequest.newBuilder(URI.create(base + "/health/ready")).build(),
              HttpResponse.BodyHandlers.ofString());
          return ready.statusCode() == 503 && ready.body().contains("AMQP exchange orders");
        });
        HttpResponse<String> ready = http.send(HttpRequest.newBuilder(URI.create(base + "/health/ready")).build(),
            HttpResponse.BodyHandlers.ofString());
        assertThat(ready.body()).contains("authentication failure").doesNotContain("n0tThePassw0rd");
      }
    }
  }

  private static Set<String> relayedKeys(EmbeddedKafka kafka, int count) {
    Set<String> keys = new HashSet<>();
    kafka.readAll("events", count, Duration.ofSeconds(2))
        .forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
    return keys;
  }
}
