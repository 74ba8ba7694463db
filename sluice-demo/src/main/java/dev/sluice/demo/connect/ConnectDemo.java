package dev.sluice.demo.connect;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.io.IOException;
import java.io.PrintStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;
import org.bson.Document;

/**
 * {@code sluice connect-demo}: the Kafka Connect source connector tried without Docker. Starts the
 * test kit's embedded Kafka broker and MongoDB, a one-worker Kafka Connect cluster (distributed
 * mode, in this JVM, the Connect version the connector is built against) whose {@code plugin.path}
 * holds the packaged plugin directory, creates the plugin's example connector ({@code
 * etc/sluice-mongodb-source.json}) through the worker's REST API with the embedded addresses
 * substituted, writes documents and prints each record as it arrives on the connector's topics,
 * then stops everything.
 *
 * <p>The connector is loaded only from the plugin directory, in Connect's plugin class loader, as
 * on a real worker: this module does not have the connector on its class path (ADR 0122).
 */
public final class ConnectDemo {
  /** The example the plugin ships, which the demo creates. */
  static final String EXAMPLE = "etc/sluice-mongodb-source.json";
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * @param documents documents to write (alternately to the example's two collections)
   * @param timeout how long to wait for every record, from the first write
   * @param pluginPath the directory to give the worker as {@code plugin.path}: it holds {@code
   *     sluice-kafka-connect/} (the module's {@code target/plugin})
   */
  public record Settings(int documents, Duration timeout, Path pluginPath) {
    public Settings {
      if (documents < 1 || documents > 100_000) {
        throw new ConfigurationException("--documents must be between 1 and 100000, was " + documents);
      }
      if (timeout.isNegative() || timeout.isZero()) {
        throw new ConfigurationException("--timeout-seconds must be positive, was " + timeout.toSeconds());
      }
      Path manifest = pluginPath.resolve("sluice-kafka-connect").resolve("manifest.json");
      if (!Files.isRegularFile(manifest)) {
        throw new ConfigurationException("--plugin-path " + pluginPath + " has no packaged connector (no "
            + manifest + "); build it with: mvn -B -ntp -pl sluice-kafka-connect -am package -Dmaven.test.skip=true");
      }
    }

    /**
     * The plugin directory of the checkout this class runs from ({@code
     * sluice-kafka-connect/target/plugin} beside {@code sluice-demo/}), where the build writes it.
     */
    public static Path defaultPluginPath() {
      try {
        Path classes = Path.of(ConnectDemo.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        // sluice-demo/target/classes (bin/sluice) or sluice-demo/target/sluice-demo-<version>.jar
        Path module = classes.getParent().getParent();
        return module.resolveSibling("sluice-kafka-connect").resolve("target").resolve("plugin").normalize();
      } catch (URISyntaxException | RuntimeException e) {
        return Path.of("sluice-kafka-connect", "target", "plugin").toAbsolutePath();
      }
    }
  }

  /** What the demo wrote and what arrived on the topics (by topic, the keys seen). */
  public record Result(int written, int arrived, Map<String, Set<String>> keysByTopic) {
    public boolean ok() {
      return arrived == written;
    }
  }

  private final Settings settings;
  private final PrintStream out;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  public ConnectDemo(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
  }

  public Result run() throws Exception {
    long start = System.nanoTime();
    JsonNode example = JSON.readTree(settings.pluginPath().resolve("sluice-kafka-connect").resolve(EXAMPLE).toFile());
    String name = example.path("name").asText();
    ObjectNode config = (ObjectNode) example.path("config").deepCopy();
    String database = config.path("mongodb.database").asText();
    List<String> collections = List.of(config.path("mongodb.collections").asText().split("\\s*,\\s*"));
    String prefix = config.path("topic.prefix").asText("sluice");

    out.println("Starting an embedded Kafka broker and an embedded MongoDB ...");
    Result result;
    try (EmbeddedKafka kafka = EmbeddedKafka.start(); EmbeddedMongo mongo = EmbeddedMongo.start()) {
      out.println("  Kafka   " + kafka.bootstrapServers());
      out.println("  MongoDB " + mongo.connectionString());
      out.println("Starting a one-worker Kafka Connect cluster (Connect " + org.apache.kafka.common.utils.AppInfoParser
          .getVersion() + ", plugin.path=" + settings.pluginPath() + ") ...");
      Connect<?> worker = new ConnectDistributed().startConnect(workerProperties(kafka.bootstrapServers()));
      try {
        String url = worker.rest().advertisedUrl().toString();
        out.println("  REST    " + url);
        Map<String, String> adapted = new LinkedHashMap<>();
        adapted.put("mongodb.connection.string", mongo.connectionString());
        // One broker: the example's replication factor 3 is for production.
        adapted.put("topic.creation.default.replication.factor", "1");
        adapted.put("topic.creation.default.partitions", "1");
        MongoDatabase db = mongo.client().getDatabase(database);
        out.println("Creating collections " + collections + " in database " + database
            + " (the connector refuses a collection that does not exist: a misspelt name would read nothing)");
        collections.forEach(db::createCollection);
        out.println("Creating connector '" + name + "' from the plugin's " + EXAMPLE + ", with:");
        adapted.forEach((k, v) -> {
          out.println("  " + k + ": " + config.path(k).asText() + " -> " + v);
          config.put(k, v);
        });
        call(url, "PUT", "connectors/" + name + "/config", JSON.writeValueAsString(config));
        awaitRunning(url, name, config.path("tasks.max").asInt(1));
        Map<String, Set<String>> expected = new LinkedHashMap<>();
        for (String c : collections) {
          expected.put(prefix + "." + database + "." + c, new LinkedHashSet<>());
        }
        out.println("Writing " + settings.documents() + " documents to " + database + "." + collections
            + "; records on " + expected.keySet() + ":");
        try (KafkaConsumer<String, String> consumer = consumer(kafka.bootstrapServers())) {
          consumer.subscribe(Pattern.compile(Pattern.quote(prefix + "." + database + ".") + ".*"));
          for (int i = 1; i <= settings.documents(); i++) {
            String collection = collections.get((i - 1) % collections.size());
            String id = collection.substring(0, 1) + i;
            db.getCollection(collection).insertOne(new Document("_id", id).append("n", i));
            expected.get(prefix + "." + database + "." + collection).add(id);
          }
          Map<String, Set<String>> seen = new HashMap<>();
          long deadline = System.nanoTime() + settings.timeout().toNanos();
          int arrived = 0;
          while (arrived < settings.documents() && System.nanoTime() < deadline) {
            for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
              String id = String.valueOf(r.key()).replaceAll("^\"|\"$", "");
              if (expected.containsKey(r.topic()) && expected.get(r.topic()).contains(id)
                  && seen.computeIfAbsent(r.topic(), t -> new LinkedHashSet<>()).add(id)) {
                arrived++;
              }
              out.printf("  %-22s partition %d offset %-3d key=%-4s %s%n", r.topic(), r.partition(), r.offset(),
                  r.key(), readable(r.value()));
            }
          }
          result = new Result(settings.documents(), arrived, seen);
          out.printf("%d of %d documents arrived as records in %.1f s%n", arrived, settings.documents(),
              (System.nanoTime() - start) / 1e9);
          if (!result.ok()) {
            out.println("Missing (after " + settings.timeout().toSeconds() + " s): " + missing(expected, seen));
          }
        }
      } finally {
        out.println("Stopping the worker, the broker and MongoDB ...");
        worker.stop();
        worker.awaitStop();
      }
    }
    out.println(result.ok() ? "RESULT: OK" : "RESULT: FAILED");
    return result;
  }

  /** The worker's settings: the README's one-broker trial configuration, and the plugin directory. */
  Map<String, String> workerProperties(String bootstrap) {
    Map<String, String> p = new HashMap<>();
    p.put("bootstrap.servers", bootstrap);
    p.put("group.id", "sluice-connect-demo");
    p.put("config.storage.topic", "sluice-connect-configs");
    p.put("offset.storage.topic", "sluice-connect-offsets");
    p.put("status.storage.topic", "sluice-connect-status");
    p.put("config.storage.replication.factor", "1");
    p.put("offset.storage.replication.factor", "1");
    p.put("status.storage.replication.factor", "1");
    p.put("offset.storage.partitions", "1");
    p.put("status.storage.partitions", "1");
    p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    p.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
    p.put("value.converter.schemas.enable", "false");
    p.put("plugin.path", settings.pluginPath().toString());
    // The connector's jar declares it in META-INF/services: no need to scan every class.
    p.put("plugin.discovery", "service_load");
    p.put("offset.flush.interval.ms", "1000");
    p.put("listeners", "http://localhost:0");
    return p;
  }

  private void awaitRunning(String url, String name, int tasks) throws Exception {
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    String last = "";
    while (System.nanoTime() < deadline) {
      try {
        JsonNode s = JSON.readTree(call(url, "GET", "connectors/" + name + "/status", null));
        last = s.toString();
        boolean running = "RUNNING".equals(s.path("connector").path("state").asText()) && s.path("tasks").size() == tasks;
        for (JsonNode t : s.path("tasks")) {
          running &= "RUNNING".equals(t.path("state").asText());
          if ("FAILED".equals(t.path("state").asText())) {
            throw new IllegalStateException("task " + t.path("id").asText() + " of connector " + name + " failed: "
                + t.path("trace").asText().lines().findFirst().orElse(""));
          }
        }
        if (running) {
          out.println("  connector " + name + " and its " + tasks + " tasks are RUNNING");
          return;
        }
      } catch (IllegalStateException e) {
        if (!String.valueOf(e.getMessage()).contains("-> 404")) {
          throw e;
        }
      }
      Thread.sleep(200); // polling the REST API, as a user would
    }
    throw new IllegalStateException("connector " + name + " not RUNNING within 60 s: " + last);
  }

  private String call(String url, String method, String path, String body) throws IOException, InterruptedException {
    HttpRequest request = HttpRequest.newBuilder(URI.create(url + path)).timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/json")
        .method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body))
        .build();
    HttpResponse<String> r = http.send(request, HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() >= 300) {
      throw new IllegalStateException(method + " " + path + " -> " + r.statusCode() + ": " + r.body());
    }
    return r.body();
  }

  private static KafkaConsumer<String, String> consumer(String bootstrap) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, "sluice-connect-demo-reader");
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    // The connector creates its topics with its first records: find them within a second.
    p.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, "500");
    return new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer());
  }

  private static List<String> missing(Map<String, Set<String>> expected, Map<String, Set<String>> seen) {
    List<String> missing = new ArrayList<>();
    expected.forEach((topic, ids) -> ids.stream().filter(id -> !seen.getOrDefault(topic, Set.of()).contains(id))
        .forEach(id -> missing.add(topic + "/" + id)));
    return missing;
  }

  /**
   * A record's value for a reader: the envelope's operation and document (the whole value, cut at
   * 200 characters, if it has no such fields).
   */
  static String readable(String value) {
    try {
      JsonNode node = JSON.readTree(value);
      if (node.has("operation") && node.has("document")) {
        JsonNode document = node.path("document"); // a JSON text in the default value.format (struct)
        return node.path("operation").asText() + " " + (document.isTextual() ? document.asText() : document);
      }
    } catch (IOException notJson) {
      // printed as it is
    }
    return value == null || value.length() <= 200 ? value : value.substring(0, 200) + "...";
  }
}
