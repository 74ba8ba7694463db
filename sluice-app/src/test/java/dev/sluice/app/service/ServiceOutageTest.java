package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.app.Main;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 12 item 1 (first part): {@code sluice run} as an operator runs it, a separate process,
 * through a MongoDB that stops answering (the test kit's {@code stall}: connections stay open, no
 * reply comes, as in a network partition or a hung primary). Before, the status loop's lease-store
 * read threw and the process exited with status 1; a MongoDB unreachable at start ended the start.
 */
class ServiceOutageTest {
  @TempDir Path dir;
  /**
   * One broker for the class instead of one per test (a start is 2-3 s quiet, more loaded), a topic of its own
   * for each test: each checks exactly what its topic holds.
   */
  private static EmbeddedKafka kafka;
  private static final AtomicInteger TOPICS = new AtomicInteger();
  private EmbeddedMongo mongo;
  private MongoClient client;
  private MongoCollection<Document> orders;
  private String topic;

  @BeforeAll
  static void startKafka() {
    kafka = EmbeddedKafka.start();
  }

  @AfterAll
  static void stopKafka() {
    kafka.close();
  }

  @BeforeEach
  void start() {
    mongo = EmbeddedMongo.start();
    client = mongo.client();
    topic = "orders-" + TOPICS.incrementAndGet();
    kafka.createTopic(topic, 1);
    orders = client.getDatabase("shop").getCollection("orders");
  }

  @AfterEach
  void stop() {
    client.close();
    mongo.close();
  }

  private Path config() throws Exception {
    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        mongodb:
          uri: %s/?socketTimeoutMS=3000&serverSelectionTimeoutMS=3000
          database: shop
        http: { port: 0 }
        listeners:
          - collection: orders
            leaseDuration: 3s
            checkpoint: { every: 10, maxDelay: 200ms }
            sink:
              kafka: { bootstrapServers: "%s", topic: %s }
        """.formatted(mongo.connectionString(), kafka.bootstrapServers(), topic));
    return config;
  }

  private Set<String> keys(int count) {
    Set<String> keys = new HashSet<>();
    kafka.readAll(topic, count, Duration.ofSeconds(2)).forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
    return keys;
  }

  private void insert(int from, int to) {
    for (int i = from; i < to; i++) {
      orders.insertOne(new Document("_id", "o" + i));
    }
  }

  private static Set<String> ids(int to) {
    Set<String> s = new HashSet<>();
    for (int i = 0; i < to; i++) {
      s.add("o" + i);
    }
    return s;
  }

  @Test
  void aRunningServiceWeathersAMongoDbThatStopsAnsweringAndRelaysEverythingAfter() throws Exception {
    try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config", config().toString(),
        "--status-every", "1")) {
      service.awaitLineStartingWith("running", Duration.ofSeconds(60));
      insert(0, 20);
      await().atMost(Duration.ofSeconds(60)).until(() -> keys(20).size() == 20);

      mongo.stall(true);
      service.awaitLineStartingWith("status unavailable, still running", Duration.ofSeconds(60));
      mongo.stall(false);
      insert(20, 40);
      await().atMost(Duration.ofSeconds(60)).until(() -> keys(40).size() == 40);
      assertThat(keys(40)).isEqualTo(ids(40));
      assertThat(service.isAlive()).as("the outage did not end the process").isTrue();
    }
  }

  /**
   * The scenario: the MongoDB server is stopped for 30 s mid-stream (connections refused
   * and dropped, as when mongod dies) and started again with its data: the process stays up the
   * whole time, readiness is DOWN while the server is away and UP again after, and every change
   * written before, during the last moments before and after the outage is in the topic.
   */
  @Test
  void aMongoDbStoppedFor30SecondsMidStreamAndStartedAgainLosesNothingAndTheServiceStaysUp() throws Exception {
    try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config", config().toString(),
        "--status-every", "1")) {
      String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60))
          .substring("http endpoint: ".length());
      await().atMost(Duration.ofSeconds(60)).until(() -> ready(base) == 200);
      insert(0, 20);
      await().atMost(Duration.ofSeconds(60)).until(() -> keys(20).size() == 20);
      insert(20, 40); // mid-stream: the service may or may not have read these when the server stops

      mongo.stopServer();
      await().atMost(Duration.ofSeconds(30)).until(() -> ready(base) == 503);
      await().during(Duration.ofSeconds(30)).atMost(Duration.ofSeconds(40)).pollInterval(Duration.ofSeconds(1))
          .until(() -> service.isAlive() && ready(base) == 503);
      mongo.startServer();

      await().atMost(Duration.ofSeconds(90)).until(() -> ready(base) == 200);
      insert(40, 60);
      await().atMost(Duration.ofSeconds(90)).until(() -> keys(60).size() == 60);
      assertThat(keys(60)).isEqualTo(ids(60));
      assertThat(service.isAlive()).isTrue();
    }
  }

  private static int ready(String base) throws Exception {
    return HTTP.send(java.net.http.HttpRequest.newBuilder(java.net.URI.create(base + "/health/ready"))
        .timeout(Duration.ofSeconds(10)).GET().build(), java.net.http.HttpResponse.BodyHandlers.discarding())
        .statusCode();
  }

  private static final java.net.http.HttpClient HTTP = java.net.http.HttpClient.newBuilder()
      .connectTimeout(Duration.ofSeconds(5)).build();

  @Test
  void aServiceStartedWhileMongoDbDoesNotAnswerWaitsForItAndThenRelays() throws Exception {
    insert(0, 1); // the database exists
    Path config = config();
    mongo.stall(true);
    try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config", config.toString())) {
      service.awaitLineStartingWith("waiting for MongoDB", Duration.ofSeconds(60));
      assertThat(service.isAlive()).isTrue();
      mongo.stall(false);
      service.awaitLineStartingWith("running", Duration.ofSeconds(60));
      insert(1, 10);
      await().atMost(Duration.ofSeconds(60)).until(() -> keys(10).containsAll(ids(10).stream()
          .filter(k -> !k.equals("o0")).toList()));
      assertThat(service.isAlive()).isTrue();
    }
  }
}
