package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.net.FaultProxy.Direction;
import java.time.Duration;
import java.util.Map;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Exactly-once source mode (KIP-618) while the network to the broker breaks: the Connect worker
 * runs against an embedded Kafka behind a fault proxy that the broker advertises, so every
 * connection of the worker (its transactional producers, its group membership, its offset, config
 * and status topics) and the broker's own transaction markers go through it. Connections are reset
 * and the broker blackholed while changes stream; a {@code read_committed} consumer reading around
 * the proxy (the broker's second listener) sees every change exactly once, in per-key order, and,
 * sampled at the moment of each fault and throughout the blackhole, never a duplicate, a gap, or a
 * change the source has not written. The blackhole outlasts the producers' delivery timeout, so
 * transactions in progress fail (and with them, per Connect's exactly-once contract, their tasks,
 * started again by the rebalance that follows, or else restarted here as an operator would): their
 * records are never seen by read_committed.
 */
class ExactlyOnceNetworkFaultConnectTest {
  private static EmbeddedKafka kafka;
  private static InMemoryMongo mongo;
  private static MongoClient client;
  private static String db;
  private static ConnectCluster cluster;

  @BeforeAll
  static void servers() {
    // A broker of its own, behind a fault proxy; stopped when the class ends, not in the JVM's
    // exit: a broker's controlled shutdown in a shutdown hook, beside the shared servers', could
    // outlast the 30 s surefire gives a fork to exit ("Error occurred in starting fork").
    kafka = EmbeddedKafka.startBehindProxy(java.time.Duration.ofMinutes(60));
    mongo = SharedServers.mongo();
    client = mongo.client();
    db = mongo.freshDatabase().getName();
    cluster = new ConnectCluster(kafka.bootstrapServers(), "eos-net", true);
  }

  @AfterAll
  static void close() {
    kafka.proxy().pass();
    try {
      cluster.close();
    } finally {
      kafka.close();
    }
  }

  @Test
  void resetsAndABlackholeMidTransactionLeaveEveryChangeExactlyOnceInPerKeyOrder() throws Exception {
    FaultProxy proxy = kafka.proxy();
    String direct = kafka.directBootstrapServers();
    client.getDatabase(db).createCollection("orders");
    MongoCollection<Document> orders = client.getDatabase(db).getCollection("orders");
    KeyedWrites writes = new KeyedWrites(orders, 4);
    String topic = "sluice." + db + ".orders";
    // Producer timeouts shorter than the blackhole below: a transaction in progress cannot
    // complete, the producer gives up, and Connect fails the task (its exactly-once contract:
    // an operator or a supervisor restarts it, then it resumes from the committed offsets).
    cluster.startWorker(Map.of("producer.request.timeout.ms", "2000", "producer.delivery.timeout.ms", "4000",
        "producer.max.block.ms", "4000"));
    Map<String, String> config = ConnectCluster.connector(mongo.uri(), db, "orders", 2, 2);
    config.put("exactly.once.support", "required");
    cluster.putConnector("orders", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("orders", 2));
    long accepted = proxy.connectionsAccepted();
    assertThat(accepted).as("the worker connects through the proxy").isPositive();

    KeyedWrites.Writer writer = writes.startWriting();
    try {
      await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.count(KeyedWrites.read(direct, topic)) >= 40);
      for (int i = 0; i < 2; i++) {
        long up = proxy.bytesForwarded(Direction.UPSTREAM);
        int before = KeyedWrites.count(KeyedWrites.read(direct, topic));
        proxy.resetConnections();
        writes.assertNothingSkippedNorDuplicated(KeyedWrites.read(direct, topic));
        await().atMost(Duration.ofSeconds(30))
            .until(() -> KeyedWrites.count(KeyedWrites.read(direct, topic)) > before + 20);
        assertThat(proxy.bytesForwarded(Direction.UPSTREAM)).isGreaterThan(up);
      }
      int before = KeyedWrites.count(KeyedWrites.read(direct, topic));
      // Longer than the producers' delivery timeout (4 s) and the worker's session timeout (6 s),
      // with transactions open: sends fail, and the tasks fail with them; what they had not
      // committed is aborted (by the transaction coordinator, or by fencing when they restart).
      long t = System.nanoTime();
      proxy.blackhole(Duration.ofSeconds(30));
      long until = t + Duration.ofSeconds(8).toNanos(); // the fault's length: a choice, not a wait for an event
      await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(500)).until(() -> {
        writes.assertNothingSkippedNorDuplicated(KeyedWrites.read(direct, topic));
        return System.nanoTime() - until >= 0;
      });
      proxy.pass();
      System.out.printf("ExactlyOnceNetworkFaultConnectTest: blackholed %d ms; after it: %s%n",
          (System.nanoTime() - t) / 1_000_000, cluster.get("/connectors/orders/status"));
      // The tasks failed (their transactions could not commit). A rebalance (the worker's
      // session expired in the blackhole) starts them again; without one they stay FAILED until
      // an operator restarts them (Connect does not restart failed tasks itself): done here only
      // when the status says FAILED, so a restart in progress is not restarted again.
      await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofSeconds(1)).until(() -> {
        if (cluster.running("orders", 2)) {
          return true;
        }
        if (cluster.get("/connectors/orders/status").toString().contains("\"FAILED\"")) {
          try {
            cluster.call("POST", "/connectors/orders/restart?includeTasks=true&onlyFailed=true", null);
          } catch (IllegalStateException e) {
            if (!String.valueOf(e.getMessage()).contains("-> 409:")) {
              throw e;
            }
          }
        }
        return false;
      });
      await().atMost(Duration.ofSeconds(60))
          .until(() -> KeyedWrites.count(KeyedWrites.read(direct, topic)) > before + 20);
    } finally {
      writer.stop();
    }
    await().atMost(Duration.ofSeconds(60)).until(() -> writes.complete(KeyedWrites.read(direct, topic)));
    writes.assertExactlyOnceInOrder(KeyedWrites.read(direct, topic));
    System.out.printf("ExactlyOnceNetworkFaultConnectTest: %s%n", cluster.get("/connectors/orders/status"));
    assertThat(cluster.running("orders", 2)).as("every task runs again").isTrue();
    assertThat(proxy.connectionsAccepted()).as("the worker reconnected through the proxy").isGreaterThan(accepted);
  }
}
