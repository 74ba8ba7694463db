package dev.sluice.benchmarks.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.app.Main;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.bson.Document;

/**
 * Figures of issue 12 for a {@code sluice run} process with 16 partitions relaying to Kafka: the
 * Prometheus scrape's size and time (median of {@code scrapes}, with the time of {@code
 * /health/live} in the same process as the baseline), and the time from a dependency's return to
 * readiness ({@code /health/ready} answering 200), for a MongoDB that stopped answering and for a
 * stopped Kafka broker ({@code rounds} each, readiness polled every 20 ms).
 */
public final class ServiceOpsBenchmark {
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static final long POLL_MILLIS = 20;

  private ServiceOpsBenchmark() {}

  public static void main(String[] args) throws Exception {
    int scrapes = args.length > 0 ? Integer.parseInt(args[0]) : 50;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    Path dir = Files.createTempDirectory("sluice-ops-bench");
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); EmbeddedKafka kafka = EmbeddedKafka.start();
        MongoClient client = mongo.client()) {
      kafka.createTopic("orders", 4);
      Path config = dir.resolve("sluice.yaml");
      Files.writeString(config, """
          mongodb:
            uri: %s/?socketTimeoutMS=3000&serverSelectionTimeoutMS=3000
            database: bench
          http: { port: 0 }
          listeners:
            - collection: orders
              partitions: 16
              sink:
                kafka: { bootstrapServers: "%s", topic: orders }
          """.formatted(mongo.connectionString(), kafka.bootstrapServers()));
      MongoCollection<Document> orders = client.getDatabase("bench").getCollection("orders");
      try (ChildJvm service = ChildJvm.start("service", List.of("-Xmx512m"), Main.class, "run", "--config",
          config.toString(), "--status-every", "3600")) {
        String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60))
            .substring("http endpoint: ".length());
        awaitStatus(base, "/health/ready", 200, Duration.ofSeconds(120));
        for (int i = 0; i < 1000; i++) {
          orders.insertOne(new Document("_id", "o" + i));
        }
        kafka.readAll("orders", 1000, Duration.ofSeconds(120));

        List<Long> scrapeMicros = new ArrayList<>();
        List<Long> liveMicros = new ArrayList<>();
        long bytes = 0;
        for (int i = 0; i < scrapes; i++) {
          long t = System.nanoTime();
          HttpResponse<String> metrics = get(base, "/metrics");
          scrapeMicros.add(TimeUnit.NANOSECONDS.toMicros(System.nanoTime() - t));
          bytes = metrics.body().getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
          t = System.nanoTime();
          get(base, "/health/live");
          liveMicros.add(TimeUnit.NANOSECONDS.toMicros(System.nanoTime() - t));
        }
        long lines = get(base, "/metrics").body().lines().filter(l -> !l.startsWith("#")).count();
        long sluiceLines = get(base, "/metrics").body().lines().filter(l -> l.startsWith("sluice_")).count();
        System.out.printf("scrape of /metrics with 16 partitions over %d scrapes: %d bytes, %d samples (%d sluice_*),"
            + " median %.1f ms (max %.1f); /health/live median %.1f ms; ratio %.1f%n", scrapes, bytes, lines,
            sluiceLines, median(scrapeMicros) / 1000.0, max(scrapeMicros) / 1000.0, median(liveMicros) / 1000.0,
            (double) median(scrapeMicros) / median(liveMicros));

        List<Long> mongoBack = new ArrayList<>();
        List<Long> kafkaBack = new ArrayList<>();
        for (int r = 0; r < rounds; r++) {
          mongoBack.add(outage(base, on -> mongo.stall(on)));
          kafkaBack.add(outage(base, on -> {
            if (on) {
              kafka.stopBroker();
            } else {
              kafka.startBroker();
            }
          }));
          System.out.printf("round %d: ready %d ms after MongoDB answered again, %d ms after the Kafka broker was back%n",
              r + 1, mongoBack.get(r), kafkaBack.get(r));
        }
        System.out.printf("time from a dependency's return to readiness over %d rounds (polled every %d ms):"
            + " MongoDB median %d ms (max %d), Kafka median %d ms (max %d)%n", rounds, POLL_MILLIS,
            median(mongoBack), max(mongoBack), median(kafkaBack), max(kafkaBack));
        if (!service.isAlive()) {
          throw new IllegalStateException("the service process ended during the outages");
        }
      }
    }
  }

  /** Takes the dependency away, waits for readiness to go down, brings it back: ms until ready. */
  private static long outage(String base, Consumer<Boolean> down) throws Exception {
    down.accept(true);
    awaitStatus(base, "/health/ready", 503, Duration.ofSeconds(60));
    down.accept(false);
    long back = System.nanoTime();
    awaitStatus(base, "/health/ready", 200, Duration.ofSeconds(120));
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - back);
  }

  private static void awaitStatus(String base, String path, int status, Duration timeout) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (get(base, path).statusCode() != status) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(path + " did not answer " + status + " within " + timeout);
      }
      Thread.sleep(POLL_MILLIS);
    }
  }

  private static HttpResponse<String> get(String base, String path) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(10)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static long median(List<Long> values) {
    List<Long> sorted = values.stream().sorted().toList();
    return sorted.get(sorted.size() / 2);
  }

  private static long max(List<Long> values) {
    return values.stream().mapToLong(Long::longValue).max().orElse(0);
  }
}
