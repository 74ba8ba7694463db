package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.jar.JarFile;
import java.util.stream.Stream;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/**
 * The plugin directory as shipped ({@code sluice-kafka-connect/target/plugin/sluice-kafka-connect},
 * made by that module's package phase, which the reactor runs before this module) loads in a
 * Connect worker whose class path holds no Sluice class and no MongoDB driver: the worker finds the connector only through {@code plugin.path}, in its own plugin class loader,
 * and runs it, on this build's Connect (3.9) and on Connect 4.1. Named {@code *IT}: this
 * module's build runs it in the integration-test phase, with the directory's path in {@code
 * sluice.connect.plugins} (see the module's pom). Both tests use the JVM's one Kafka broker and
 * MongoDB ({@link SharedServers}), each with its own Connect group and database.
 */
class PluginDirectoryIT {
  private static final Path PLUGINS = Path.of(System.getProperty("sluice.connect.plugins",
      "../sluice-kafka-connect/target/plugin")).toAbsolutePath().normalize();

  @Test
  void aWorkerWithoutTheConnectorOnItsClassPathRunsItFromThePluginDirectory() throws Exception {
    Path plugin = PLUGINS.resolve("sluice-kafka-connect");
    assertThat(plugin).as("made by: mvn -pl sluice-kafka-connect -am package -Dmaven.test.skip=true").isDirectory();
    assertThat(plugin.resolve("manifest.json")).content().contains("Apache License 2.0", "PostgreSQL", "MongoDB")
        .doesNotContain("README.md#");
    assertThat(plugin.resolve("doc").resolve("README.md")).content().contains("## Kafka Connect source connector");
    assertThat(plugin.resolve("etc").resolve("sluice-mongodb-source.json")).exists();
    assertThat(plugin.resolve("monitoring")).isDirectoryContaining("glob:**/jmx-exporter.yaml")
        .isDirectoryContaining("glob:**/prometheus-rules.yaml").isDirectoryContaining("glob:**/grafana-dashboard.json");
    assertThat(plugin.resolve("etc").resolve("sluice-postgresql-source.json")).content()
        .contains("\"source.type\": \"postgresql\"");
    assertThat(plugin.resolve("doc").resolve("LICENSE")).content()
        .contains("Apache License", "Version 2.0, January 2004");
    List<String> jars;
    try (Stream<Path> lib = Files.list(plugin.resolve("lib"))) {
      jars = lib.map(p -> p.getFileName().toString()).toList();
    }
    assertThat(jars).anyMatch(j -> j.startsWith("sluice-kafka-connect-") && j.endsWith(".jar"))
        .anyMatch(j -> j.startsWith("mongodb-driver-sync-"))
        .noneMatch(j -> j.startsWith("kafka-clients-") || j.startsWith("connect-api-"));

    EmbeddedKafka kafka = SharedServers.kafka();
    InMemoryMongo mongo = SharedServers.mongo();
    try (ConnectCluster cluster = new ConnectCluster(kafka.bootstrapServers(), "plugin", false)) {
      ChildJvm worker = cluster.startChildWorker("plugin-worker", workerClassPath(),
          Map.of("plugin.path", PLUGINS.toString()));
      assertThat(worker.output()).as("the worker's own class path has no connector").contains(
          "CONNECTOR-ON-CLASS-PATH false");

      JsonNode found = null;
      for (JsonNode p : cluster.get("/connector-plugins?connectorsOnly=true")) {
        if (SluiceSourceConnector.class.getName().equals(p.path("class").asText())) {
          found = p;
        }
      }
      assertThat(found).as("the connector among the worker's plugins").isNotNull();
      assertThat(found.path("type").asText()).isEqualTo("source");

      String db = mongo.freshDatabase().getName(); // the deployment -Dsluice.mongodb.uri names, or embedded
      mongo.client().getDatabase(db).createCollection("orders");
      MongoCollection<Document> orders = mongo.client().getDatabase(db).getCollection("orders");
      cluster.putConnector("orders", ConnectCluster.connector(mongo.uri(), db, "orders", 2, 2));
      await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("orders", 2));
      List<String> keys = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        orders.insertOne(new Document("_id", "p" + i));
        keys.add("p" + i);
      }
      await().atMost(Duration.ofSeconds(60))
          .until(() -> KeyedWrites.keys(kafka.bootstrapServers(), "sluice." + db + ".orders").size() >= keys.size());
      assertThat(KeyedWrites.keys(kafka.bootstrapServers(), "sluice." + db + ".orders"))
          .containsExactlyInAnyOrderElementsOf(keys);
    }
  }

  /**
   * The same plugin directory on a Connect 4.1 worker (its own class path, from module
   * sluice-connect41-worker, against this build's Kafka 3.9 broker): the connector, built against
   * Connect 3.9's API, runs there, and its task metrics are also in Connect's own plugin metrics
   * (KIP-877), which the worker reports as {@code kafka.connect:type=plugins,connector=..,task=..}.
   */
  @Test
  void onAConnect41WorkerTheTaskMetricsAreConnectPluginMetrics() throws Exception {
    Path classpathFile = Path.of(System.getProperty("sluice.connect41.classpath",
        "../sluice-connect41-worker/target/worker.classpath"));
    assertThat(classpathFile).as("built by module sluice-connect41-worker").exists();
    Path tests = Path.of(WorkerMain.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    String classPath = Files.readString(classpathFile).trim() + File.pathSeparator + tests;
    EmbeddedKafka kafka = SharedServers.kafka();
    InMemoryMongo mongo = SharedServers.mongo();
    try (ConnectCluster cluster = new ConnectCluster(kafka.bootstrapServers(), "plugin41", false)) {
      ChildJvm worker = cluster.startChildWorker("connect41-worker", classPath,
          Map.of("plugin.path", PLUGINS.toString(), WorkerMain.DUMP_METRICS, "kafka.connect:type=plugins,*"));
      try {
        runOnConnect41(kafka, mongo, cluster, worker);
      } catch (AssertionError | RuntimeException e) {
        List<String> out = worker.output().stream().filter(l -> !l.contains("rest.RestServer")).toList();
        String status;
        try {
          status = cluster.get("/connectors/m41/status").toString();
        } catch (RuntimeException unavailable) {
          status = unavailable.toString();
        }
        throw new AssertionError(e.getMessage() + "\nconnector status: " + status
            + "\nthe Connect 4.1 worker's last output (without REST requests):\n"
            + String.join("\n", out.subList(Math.max(0, out.size() - 60), out.size())), e);
      }
    }
  }

  private static void runOnConnect41(EmbeddedKafka kafka, InMemoryMongo mongo, ConnectCluster cluster, ChildJvm worker) {
    {
      assertThat(cluster.get("/").path("version").asText()).startsWith("4.1.");

      String db = mongo.freshDatabase().getName();
      mongo.client().getDatabase(db).createCollection("orders");
      MongoCollection<Document> orders = mongo.client().getDatabase(db).getCollection("orders");
      cluster.putConnector("m41", ConnectCluster.connector(mongo.uri(), db, "orders", 1, 1));
      await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("m41", 1));
      for (int i = 0; i < 7; i++) {
        orders.insertOne(new Document("_id", "m" + i));
      }
      await().atMost(Duration.ofSeconds(60))
          .until(() -> KeyedWrites.keys(kafka.bootstrapServers(), "sluice." + db + ".orders").size() == 7);
      await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(worker.output())
          .anySatisfy(l -> assertThat(l).startsWith("METRIC kafka.connect:type=plugins")
              .contains("connector=m41", "task=0", " changes-total=7.0"))
          .anySatisfy(l -> assertThat(l).startsWith("METRIC kafka.connect:type=plugins")
              .contains("connector=m41", " lag-ms=0")));
      assertThat(worker.output()).noneMatch(l -> l.startsWith("METRIC-ERROR") && l.contains("m41"));
    }
  }

  /**
   * This JVM's class path without what the plugin must bring itself: every entry with Sluice's
   * classes (but the test classes, for {@link WorkerMain}), the MongoDB driver and BSON. What stays
   * is the worker's: Kafka, Connect, Jackson, logging.
   */
  private static String workerClassPath() throws URISyntaxException {
    Path tests = Path.of(WorkerMain.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    List<String> kept = new ArrayList<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      Path p = Path.of(entry).toAbsolutePath();
      if (p.equals(tests) || !holdsAny(p, "dev/sluice/", "com/mongodb/", "org/bson/")) {
        kept.add(entry);
      }
    }
    return String.join(File.pathSeparator, kept);
  }

  private static boolean holdsAny(Path entry, String... prefixes) {
    if (Files.isDirectory(entry)) {
      return Stream.of(prefixes).anyMatch(prefix -> Files.exists(entry.resolve(prefix)));
    }
    if (!Files.isRegularFile(entry)) {
      return false;
    }
    try (JarFile jar = new JarFile(entry.toFile())) {
      return jar.stream().anyMatch(e -> Stream.of(prefixes).anyMatch(prefix -> e.getName().startsWith(prefix)));
    } catch (IOException e) {
      throw new UncheckedIOException(entry.toString(), e);
    }
  }
}
