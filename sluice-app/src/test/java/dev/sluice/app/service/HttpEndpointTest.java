package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.ConfigurationException;
import dev.sluice.app.Main;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 12 item 2: the service's HTTP endpoint, asked with a real HTTP client of a {@code sluice
 * run} process: liveness, readiness that goes DOWN while MongoDB does not answer and UP again when
 * it does, the JSON status, Prometheus metrics, and the errors for a port that cannot be used.
 * Stages a MongoDB that stops answering ({@code stall}), so it starts its own embedded server even
 * under {@code -Dsluice.mongodb.uri}.
 */
class HttpEndpointTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  @TempDir Path dir;
  /**
   * One broker for the class instead of one per test (a start is 2-3 s quiet, 13 s cold and loaded
   * in this class's log on a shared machine): the tests that read
   * the topic or stop the broker have a topic of their own; the broker is started again by the test
   * that stops it.
   */
  private static EmbeddedKafka kafka;
  private EmbeddedMongo mongo;
  private MongoClient client;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @BeforeAll
  static void startKafka() {
    kafka = EmbeddedKafka.start();
    kafka.createTopic("orders", 1);
  }

  @AfterAll
  static void stopKafka() {
    kafka.close();
  }

  @BeforeEach
  void start() {
    mongo = EmbeddedMongo.start();
    client = mongo.client();
  }

  @AfterEach
  void stop() {
    client.close();
    mongo.close();
  }

  private Path config(String http) throws Exception {
    return config(http, "orders");
  }

  private Path config(String http, String topic) throws Exception {
    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        mongodb:
          uri: %s/?socketTimeoutMS=3000&serverSelectionTimeoutMS=3000
          database: shop
        %s
        listeners:
          - collection: orders
            partitions: 2
            leaseDuration: 3s
            checkpoint: { every: 10, maxDelay: 200ms }
            sink:
              kafka: { bootstrapServers: "%s", topic: %s }
        """.formatted(mongo.connectionString(), http, kafka.bootstrapServers(), topic));
    return config;
  }

  private HttpResponse<String> get(String base, String path) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(10)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void aRunningServiceAnswersLivenessReadinessStatusAndMetricsAndReadinessFollowsMongoDb() throws Exception {
    MongoCollection<Document> orders = client.getDatabase("shop").getCollection("orders");
    try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config",
        config("http: { port: 0 }").toString(), "--status-every", "1")) {
      String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60)).substring("http endpoint: ".length());
      assertThat(base).startsWith("http://127.0.0.1:");

      assertThat(get(base, "/health/live").statusCode()).isEqualTo(200);
      await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
      for (int i = 0; i < 10; i++) {
        orders.insertOne(new Document("_id", "o" + i));
      }
      await().atMost(Duration.ofSeconds(60)).until(() -> processed(get(base, "/status").body()) == 10);

      JsonNode status = JSON.readTree(get(base, "/status").body());
      JsonNode listener = status.get("listeners").get(0);
      assertThat(listener.get("stream").asText()).isEqualTo("shop.orders");
      assertThat(listener.get("group").asText()).isEqualTo("kafka-orders");
      assertThat(listener.get("sink").asText()).isEqualTo("kafka topic orders");
      assertThat(listener.get("parked").asLong()).isZero();
      assertThat(listener.get("partitions")).hasSize(2);
      assertThat(listener.get("partitions")).allSatisfy(p -> {
        assertThat(p.get("state").asText()).isEqualTo("ACTIVE");
        assertThat(p.get("epoch").asLong()).isPositive();
        assertThat(p.has("lagMillis")).isTrue();
        assertThat(p.has("historyLeftSeconds")).isTrue();
      });
      assertThat(listener.get("records")).extracting(r -> r.get("name").asText())
          .contains("kafka-orders/shop.orders#0of2", "kafka-orders/shop.orders#1of2");

      HttpResponse<String> metrics = get(base, "/metrics");
      assertThat(metrics.statusCode()).isEqualTo(200);
      assertThat(metrics.headers().firstValue("Content-Type")).hasValueSatisfying(t -> assertThat(t).startsWith("text/plain"));
      assertThat(metrics.body()).contains("jvm_memory_used_bytes", "process_uptime_seconds",
          "sluice_partition_active{lease=\"kafka-orders/shop.orders#0of2\"} 1.0",
          "sluice_partition_lag_seconds{lease=\"kafka-orders/shop.orders#1of2\"}",
          "sluice_partition_history_seconds{lease=\"kafka-orders/shop.orders#0of2\"}");
      await().atMost(Duration.ofSeconds(30)).until(() -> get(base, "/metrics").body()
          .contains("sluice_changes_delivered_total{group=\"kafka-orders\",stream=\"shop.orders\"} 10.0"));
      // The shipped dashboard and alert rules ask only for what the service exports (PostgreSQL's slot
      // gauges are checked on a PostgreSQL source, in PostgresSourceServiceTest).
      MonitoringFiles.assertExported(MonitoringFiles.queries(), get(base, "/metrics").body(),
          metric -> !metric.startsWith("sluice_pg_"));

      assertThat(get(base, "/nothing-here").statusCode()).isEqualTo(404);
      HttpResponse<String> post = http.send(HttpRequest.newBuilder(URI.create(base + "/status"))
          .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
      assertThat(post.statusCode()).isEqualTo(405);

      mongo.stall(true);
      await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 503);
      assertThat(get(base, "/health/ready").body()).contains("MongoDB does not answer");
      assertThat(get(base, "/health/live").statusCode()).as("alive through the outage").isEqualTo(200);
      mongo.stall(false);
      await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
      assertThat(service.isAlive()).isTrue();
    }
  }

  /**
   * The Kafka broker stops while changes keep coming: the service stays up, readiness goes DOWN
   * naming Kafka and comes back UP once the broker is back, and every change written during the
   * outage is in the topic (checked against what was written).
   */
  @Test
  void aKafkaOutageMakesTheServiceNotReadyAndNothingWrittenMeanwhileIsLost() throws Exception {
    MongoCollection<Document> orders = client.getDatabase("shop").getCollection("orders");
    kafka.createTopic("orders-outage", 1); // its own: read back exactly, and the broker stops
    try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config",
        config("http: { port: 0 }", "orders-outage").toString())) {
      String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60)).substring("http endpoint: ".length());
      await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
      for (int i = 0; i < 10; i++) {
        orders.insertOne(new Document("_id", "o" + i));
      }
      await().atMost(Duration.ofSeconds(60)).until(() -> keys(10).size() == 10);

      kafka.stopBroker();
      for (int i = 10; i < 30; i++) {
        orders.insertOne(new Document("_id", "o" + i));
      }
      await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 503);
      assertThat(get(base, "/health/ready").body()).contains("kafka topic orders-outage: Kafka at");
      assertThat(get(base, "/health/live").statusCode()).as("alive through the outage").isEqualTo(200);
      assertThat(service.isAlive()).isTrue();

      kafka.startBroker();
      await().atMost(Duration.ofSeconds(90)).until(() -> get(base, "/health/ready").statusCode() == 200);
      await().atMost(Duration.ofSeconds(90)).until(() -> keys(30).size() == 30);
      Set<String> written = new HashSet<>();
      for (int i = 0; i < 30; i++) {
        written.add("o" + i);
      }
      assertThat(keys(30)).isEqualTo(written);
      assertThat(service.isAlive()).isTrue();
    }
  }

  /**
   * The same with the AMQP broker: stopped while changes keep coming, the service stays up and
   * not ready naming the broker; once it is back (a memory broker: the exchange and queue are
   * declared again), every change written meanwhile arrives.
   */
  @Test
  void anAmqpBrokerOutageMakesTheServiceNotReadyAndNothingWrittenMeanwhileIsLost() throws Exception {
    MongoCollection<Document> orders = client.getDatabase("shop").getCollection("orders");
    try (EmbeddedAmqpBroker amqp = EmbeddedAmqpBroker.start()) {
      amqp.declareQueue("orders", "orders-q", "#");
      Path config = dir.resolve("sluice-amqp.yaml");
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
                amqp: { uri: "%s", exchange: orders }
          """.formatted(mongo.connectionString(), amqp.uri()));
      try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config", config.toString())) {
        String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60)).substring("http endpoint: ".length());
        await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
        Set<String> received = new HashSet<>();
        for (int i = 0; i < 10; i++) {
          orders.insertOne(new Document("_id", "o" + i));
        }
        await().atMost(Duration.ofSeconds(60)).until(() -> drain(amqp, received).size() >= 10);

        amqp.stop();
        for (int i = 10; i < 30; i++) {
          orders.insertOne(new Document("_id", "o" + i));
        }
        await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 503);
        assertThat(get(base, "/health/ready").body()).contains("AMQP exchange orders: the AMQP broker at");
        assertThat(service.isAlive()).isTrue();

        amqp.startBroker();
        amqp.declareQueue("orders", "orders-q", "#");
        await().atMost(Duration.ofSeconds(90)).until(() -> get(base, "/health/ready").statusCode() == 200);
        Set<String> written = new HashSet<>();
        for (int i = 0; i < 30; i++) {
          written.add("o" + i);
        }
        await().atMost(Duration.ofSeconds(90)).until(() -> drain(amqp, received).containsAll(written));
        assertThat(service.isAlive()).isTrue();
      }
    }
  }

  /** Adds the keys of the messages waiting in the queue to {@code into}. */
  private static Set<String> drain(EmbeddedAmqpBroker amqp, Set<String> into) throws Exception {
    try (com.rabbitmq.client.Connection c = amqp.connectionFactory().newConnection();
        com.rabbitmq.client.Channel ch = c.createChannel()) {
      com.rabbitmq.client.GetResponse r;
      while ((r = ch.basicGet("orders-q", true)) != null) {
        into.add(JSON.readTree(r.getBody()).path("key").asText());
      }
    }
    return into;
  }

  private Set<String> keys(int count) {
    Set<String> keys = new HashSet<>();
    kafka.readAll("orders-outage", count, Duration.ofSeconds(2))
        .forEach(r -> keys.add(new String(r.key(), java.nio.charset.StandardCharsets.UTF_8)));
    return keys;
  }

  @Test
  void aServiceWaitingForMongoDbAtStartIsAliveAndNotReadyUntilItAnswers() throws Exception {
    client.getDatabase("shop").getCollection("orders").insertOne(new Document("_id", "o0"));
    Path config = config("http: { port: 0 }");
    mongo.stall(true);
    try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config", config.toString())) {
      String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60)).substring("http endpoint: ".length());
      service.awaitLineStartingWith("waiting for MongoDB", Duration.ofSeconds(60));
      assertThat(get(base, "/health/live").statusCode()).isEqualTo(200);
      HttpResponse<String> ready = get(base, "/health/ready");
      assertThat(ready.statusCode()).isEqualTo(503);
      assertThat(ready.body()).contains("starting").contains("MongoDB does not answer");
      mongo.stall(false);
      await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
      assertThat(service.isAlive()).isTrue();
    }
  }

  private static long processed(String status) throws Exception {
    long sum = 0;
    for (JsonNode p : JSON.readTree(status).get("listeners").get(0).get("partitions")) {
      sum += p.get("processed").asLong();
    }
    return sum;
  }

  @Test
  void aPortInUseIsAConfigurationErrorNamingItAndTheWayOut() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      Path config = config("http: { port: " + taken.getLocalPort() + " }");
      assertThatThrownBy(() -> SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry()))
          .isInstanceOf(ConfigurationException.class)
          .hasMessageContaining("cannot listen on 127.0.0.1:" + taken.getLocalPort())
          .hasMessageContaining("http.enabled: false");
    }
  }

  @Test
  void theEndpointCanBeSwitchedOff() throws Exception {
    try (SluiceService service = SluiceService.start(ConfigLoader.load(config("http: { enabled: false }")),
        new SimpleMeterRegistry())) {
      assertThat(service.httpAddress()).isEmpty();
    }
  }
}
