package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Exactly-once source mode (KIP-618) on a real three-worker Connect cluster: one worker is a child
 * JVM killed with SIGKILL mid-stream and another worker is added; the topic read with
 * read_committed holds every change exactly once in per-key order. Then the whole cluster stops,
 * changes are written while it is down, and a new cluster resumes from the committed offsets:
 * still exactly once (a restart that ignored the offsets would read the oplog from its start
 * again, per startup.mode=oldest, and duplicate everything). The tasks' JMX metrics count the
 * changes they read and show no lag once caught up. Runs on the deployment {@code
 * -Dsluice.mongodb.uri} names, or the embedded server.
 */
class ExactlyOnceConnectTest {
  private static EmbeddedKafka kafka;
  private static InMemoryMongo mongo;
  private static MongoClient client;
  private static String db;
  private static ConnectCluster cluster;

  @BeforeAll
  static void servers() {
    kafka = SharedServers.kafka();
    mongo = SharedServers.mongo();
    client = mongo.client();
    db = mongo.freshDatabase().getName();
    cluster = new ConnectCluster(kafka.bootstrapServers(), "eos", true);
  }

  @AfterAll
  static void close() {
    cluster.close();
  }

  @Test
  void aKilledWorkerAndAWholeClusterRestartLeaveEveryChangeExactlyOnceInPerKeyOrder() throws Exception {
    MongoCollection<Document> orders = client.getDatabase(db).getCollection("orders");
    client.getDatabase(db).createCollection("orders"); // validate refuses unknown collections
    KeyedWrites writes = new KeyedWrites(orders, 6);
    String topic = "sluice." + db + ".orders";

    // The worker to be killed joins last, so it is not the group's leader: with exactly-once
    // support a task that starts asks the leader (over REST) to fence its zombies, and Connect fails
    // for good a task whose request went to a leader killed at that moment (it waits for an
    // operator's restart). That is Connect's availability, not the exactly-once guarantee this tests.
    cluster.startWorker();
    cluster.startWorker();
    ChildJvm doomed = cluster.startChildWorker("eos-worker-1");

    // Bad configurations are refused through Connect's own REST validate, each under its key.
    Map<String, String> bad = ConnectCluster.connector(mongo.uri(), db, "orders,nosuch", 4, 4);
    bad.put("value.format", "avro");
    JsonNode result = cluster.put("/connector-plugins/SluiceSourceConnector/config/validate", bad);
    assertThat(errors(result, "value.format")).anySatisfy(e -> assertThat(e).contains("avro"));
    bad.put("value.format", "struct");
    result = cluster.put("/connector-plugins/SluiceSourceConnector/config/validate", bad);
    assertThat(errors(result, "mongodb.collections")).anySatisfy(e -> assertThat(e).contains("[nosuch]"));

    Map<String, String> config = ConnectCluster.connector(mongo.uri(), db, "orders", 4, 4);
    config.put("exactly.once.support", "required");
    cluster.putConnectorWithTasksOn(doomed, "orders", config, 4);

    // SIGKILL mid-stream: its open transactions are aborted, its tasks fenced; another worker joins.
    cluster.killWorkerMidStream(doomed, "orders", 4, writes, topic, 60, 60);
    writes.assertExactlyOnceInOrder(KeyedWrites.read(kafka.bootstrapServers(), topic));

    // The whole cluster goes down; changes arrive meanwhile; a new cluster resumes from the offsets.
    cluster.restartAllWhileWriting(writes, 20, topic);
    writes.assertExactlyOnceInOrder(KeyedWrites.read(kafka.bootstrapServers(), topic));

    JsonNode offsets = cluster.get("/connectors/orders/offsets").path("offsets");
    assertThat(offsets).as(offsets.toString()).hasSize(4);
    offsets.forEach(o -> {
      assertThat(o.path("partition").path("stream").asText()).isEqualTo(db + ".orders");
      assertThat(o.path("partition").path("partitions").asInt()).isEqualTo(4);
      assertThat(o.path("offset").path("position").asText()).isNotBlank();
      assertThat(o.path("offset").path("epoch").asLong()).isPositive();
    });
    // A partition that published after the restart did so in a later tenure than its first.
    assertThat(offsets).anySatisfy(o -> assertThat(o.path("offset").path("epoch").asLong()).isGreaterThanOrEqualTo(2));

    // The task metrics over JMX (both workers run in this JVM now), once the tasks are spread over
    // both workers (no rebalance restarts a task, and its counters, during the count below):
    // changes-total counts each change handed to Connect once, lag-ms is 0 once caught up.
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("orders", 4)
        && cluster.taskWorkers("orders").stream().distinct().count() == 2);
    MBeanServer jmx = ManagementFactory.getPlatformMBeanServer();
    ObjectName pattern = new ObjectName("sluice.connect:type=source-task-metrics,connector=orders,*");
    await().atMost(Duration.ofSeconds(30)).until(() -> jmx.queryNames(pattern, null).size() == 4);
    double before = sum(jmx, pattern, "changes-total");
    for (int i = 0; i < 5; i++) {
      writes.round();
    }
    await().atMost(Duration.ofSeconds(60)).until(() -> writes.complete(KeyedWrites.read(kafka.bootstrapServers(), topic)));
    await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> {
      assertThat(sum(jmx, pattern, "changes-total") - before).as("changes-total of the 4 tasks").isEqualTo(30.0);
      for (ObjectName task : jmx.queryNames(pattern, null)) {
        assertThat(((Number) jmx.getAttribute(task, "lag-ms")).longValue()).as("lag-ms of %s", task).isZero();
      }
    });
    assertThat(jmx.queryNames(pattern, null)).extracting(n -> n.getKeyProperty("task"))
        .containsExactlyInAnyOrder("0", "1", "2", "3");
    writes.assertExactlyOnceInOrder(KeyedWrites.read(kafka.bootstrapServers(), topic));
  }

  private static double sum(MBeanServer jmx, ObjectName pattern, String attribute) throws Exception {
    double total = 0;
    for (ObjectName task : jmx.queryNames(pattern, null)) {
      total += ((Number) jmx.getAttribute(task, attribute)).doubleValue();
    }
    return total;
  }

  static List<String> errors(JsonNode validate, String key) {
    for (JsonNode c : validate.path("configs")) {
      if (key.equals(c.path("value").path("name").asText())) {
        List<String> out = new java.util.ArrayList<>();
        c.path("value").path("errors").forEach(e -> out.add(e.asText()));
        return out;
      }
    }
    return List.of();
  }

}
