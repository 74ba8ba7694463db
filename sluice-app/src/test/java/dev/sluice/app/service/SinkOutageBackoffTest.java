package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.mongodb.client.MongoCollection;
import dev.sluice.ConfigurationException;
import dev.sluice.app.Main;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.LoggerFactory;

/**
 * Issue 37 item 5: a broker that refuses connections (its address works, the broker is down) is
 * tried again with an exponential back-off, and each failure is said once per back-off in Sluice's
 * own log; before, a refused AMQP connection was retried (and logged twice) every ~210 ms. A broker
 * address that cannot work at all (a host that does not resolve) is refused at start naming the
 * setting (exit 3) instead of failing every ~280 ms for ever. The AMQP broker is reached through a
 * {@link FaultProxy} that refuses connections ({@code cut}) and then passes again.
 */
class SinkOutageBackoffTest {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern FLUSH_FAILED = Pattern.compile("Handler flush failed for .* in (\\d+) ms: ");
  private static InMemoryMongo mongo;
  private static EmbeddedAmqpBroker amqp;
  @TempDir Path dir;
  @RegisterExtension final FaultProxies proxies = new FaultProxies();
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @BeforeAll
  static void servers() {
    mongo = new InMemoryMongo();
    amqp = EmbeddedAmqpBroker.start();
  }

  @AfterAll
  static void stopServers() {
    amqp.close();
    mongo.close();
  }

  @Test
  void aRefusedAmqpConnectionIsRetriedWithABackOffLoggedOncePerAttemptAndNothingIsLost() throws Exception {
    String shop = mongo.freshDatabase().getName();
    String queue = "q-" + shop;
    amqp.declareQueue("orders-" + shop, queue, "#");
    FaultProxy proxy = proxies.to("amqp", "127.0.0.1", amqp.port());
    MongoCollection<Document> orders = mongo.client().getDatabase(shop).getCollection("orders");
    Path config = config(shop, "amqp: { uri: \"" + amqp.uri(proxy) + "\", exchange: orders-" + shop + " }");
    ListAppender<ILoggingEvent> log = capture();
    try (SluiceService service = SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry())) {
      String base = "http://127.0.0.1:" + service.httpAddress().orElseThrow().getPort();
      await().atMost(Duration.ofSeconds(30)).until(() -> ready(base).statusCode() == 200);
      insert(orders, 0, 5);
      Set<String> received = new HashSet<>();
      await().atMost(Duration.ofSeconds(30)).until(() -> drain(queue, received).size() >= 5);

      proxy.cut(Duration.ofSeconds(60)); // connections closed, new ones refused: the broker is down
      insert(orders, 5, 10);
      await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(100))
          .until(() -> ready(base).statusCode() == 503);
      assertThat(ready(base).body()).as("readiness names the broker")
          .contains("AMQP exchange orders-" + shop + ": the AMQP broker at " + proxy.address());

      // 200, 400, 800, 1600 ms: four failures in about 3 s (every ~210 ms before: about 15).
      await().atMost(Duration.ofSeconds(30)).until(() -> backoffs(log).contains(1600L));
      List<ILoggingEvent> events = snapshot(log);
      List<Long> backoffs = backoffs(log);
      assertThat(backoffs.subList(0, backoffs.indexOf(1600L) + 1)).as("the waits before each new attempt")
          .containsExactly(200L, 400L, 800L, 1600L);
      long firstFailure = events.stream().filter(e -> FLUSH_FAILED.matcher(e.getFormattedMessage()).find())
          .findFirst().orElseThrow().getTimeStamp();
      long fourth = events.stream().filter(e -> e.getFormattedMessage().contains(" in 1600 ms: "))
          .findFirst().orElseThrow().getTimeStamp();
      List<String> warnings = events.stream()
          .filter(e -> e.getLevel().isGreaterOrEqual(Level.WARN))
          .filter(e -> !e.getLoggerName().startsWith("de.bwaldvogel")) // the test's MongoDB server, not the service
          .filter(e -> e.getTimeStamp() >= firstFailure && e.getTimeStamp() <= fourth)
          .map(e -> e.getLoggerName() + ": " + e.getFormattedMessage()).toList();
      warnings.forEach(w -> System.out.println("SinkOutageBackoffTest: " + w));
      assertThat(warnings).as("at most the sink's and the listener's line per failed attempt").hasSizeLessThanOrEqualTo(8);

      proxy.pass();
      await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100))
          .until(() -> ready(base).statusCode() == 200);
      await().atMost(Duration.ofSeconds(30)).until(() -> drain(queue, received).size() >= 10);
      assertThat(received).as("nothing lost").containsAll(keys(0, 10));
      assertThat(proxy.connectionsRefused()).as("the sink and the probe went through the proxy").isPositive();
    } finally {
      ((Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME)).detachAppender(log);
      proxies.passAll();
    }
  }

  /** Kafka bootstrap servers none of which resolves: refused at start naming the setting, exit 3. */
  @Test
  void kafkaBootstrapServersThatDoNotResolveAreRefusedAtStart() throws Exception {
    String shop = mongo.freshDatabase().getName();
    Path config = config(shop, "kafka: { bootstrapServers: \"no-such-broker.invalid:9092\", topic: orders }");
    assertRefused(config, "listeners[0].sink.kafka.bootstrapServers 'no-such-broker.invalid:9092'",
        "no host of it resolves");
  }

  /** An AMQP URI whose host does not resolve: refused at start naming the setting, password masked, exit 3. */
  @Test
  void anAmqpHostThatDoesNotResolveIsRefusedAtStart() throws Exception {
    String shop = mongo.freshDatabase().getName();
    Path config = config(shop, "amqp: { uri: \"amqp://app:s3cret@no-such-broker.invalid:5672/\", exchange: orders }");
    assertRefused(config, "listeners[0].sink.amqp.uri 'amqp://app:****@no-such-broker.invalid:5672/'",
        "host 'no-such-broker.invalid' does not resolve");
  }

  private static void assertRefused(Path config, String... says) {
    assertThatThrownBy(() -> SluiceService.start(ConfigLoader.load(config), new SimpleMeterRegistry()).close())
        .isInstanceOf(ConfigurationException.class)
        .satisfies(e -> assertThat(Main.exitCode(e)).isEqualTo(Main.EXIT_CONFIGURATION))
        .satisfies(e -> assertThat(e.getMessage()).contains(says).doesNotContain("s3cret"));
  }

  private Path config(String shop, String sink) throws Exception {
    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        mongodb:
          uri: "%s"
          database: %s
        http: { port: 0 }
        listeners:
          - collection: orders
            leaseDuration: 2s
            checkpoint: { every: 1, maxDelay: 100ms }
            sink:
              %s
        """.formatted(mongo.uri(), shop, sink));
    return config;
  }

  private static ListAppender<ILoggingEvent> capture() {
    ListAppender<ILoggingEvent> appender = new ListAppender<>();
    appender.start();
    ((Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME)).addAppender(appender);
    return appender;
  }

  private static List<ILoggingEvent> snapshot(ListAppender<ILoggingEvent> log) {
    synchronized (log.list) {
      return List.copyOf(log.list);
    }
  }

  /** The back-offs the listener announced after each failed flush, in order. */
  private static List<Long> backoffs(ListAppender<ILoggingEvent> log) {
    return snapshot(log).stream().map(e -> FLUSH_FAILED.matcher(e.getFormattedMessage()))
        .filter(Matcher::find).map(m -> Long.parseLong(m.group(1))).toList();
  }

  private static Set<String> keys(int from, int to) {
    Set<String> keys = new HashSet<>();
    for (int i = from; i < to; i++) {
      keys.add("o" + i);
    }
    return keys;
  }

  private static void insert(MongoCollection<Document> orders, int from, int to) {
    for (int i = from; i < to; i++) {
      orders.insertOne(new Document("_id", "o" + i));
    }
  }

  private static Set<String> drain(String queue, Set<String> into) throws Exception {
    try (com.rabbitmq.client.Connection c = amqp.connectionFactory().newConnection();
        com.rabbitmq.client.Channel ch = c.createChannel()) {
      com.rabbitmq.client.GetResponse r;
      while ((r = ch.basicGet(queue, true)) != null) {
        into.add(JSON.readTree(r.getBody()).path("key").asText());
      }
    }
    return into;
  }

  private HttpResponse<String> ready(String base) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create(base + "/health/ready")).timeout(Duration.ofSeconds(10))
        .GET().build(), HttpResponse.BodyHandlers.ofString());
  }
}
