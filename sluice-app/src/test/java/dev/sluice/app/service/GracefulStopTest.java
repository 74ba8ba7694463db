package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.app.Main;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 12 item 1: {@code sluice run} stopped with SIGTERM, as an orchestrator stops it, commits
 * what it processed and releases its lease before it exits, so its peer takes the partition over
 * without waiting for the lease to expire; nothing is lost. The hand-over time is a figure of the
 * failover benchmark (docs/benchmarks.md), not asserted here.
 */
class GracefulStopTest {
  private static final String LEASE = "kafka-orders/%s.orders#0of1";
  @TempDir Path dir;

  @Test
  void aServiceStoppedWithSigtermReleasesItsLeaseToItsPeerAndLosesNothing() throws Exception {
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
              leaseDuration: 30s
              checkpoint: { every: 1000, maxDelay: 30s }
              sink:
                kafka: { bootstrapServers: "%s", topic: orders }
          """.formatted(mongo.uri(), shop, kafka.bootstrapServers()));
      MongoCollection<Document> orders = client.getDatabase(shop).getCollection("orders");
      LeaseStore leases = MongoLeaseStore.builder(client.getDatabase(shop)).build();
      String lease = LEASE.formatted(shop);

      try (ChildJvm first = ChildJvm.start("first", Main.class, "run", "--config", config.toString())) {
        await().atMost(Duration.ofSeconds(60)).until(() -> leases.read(lease).filter(LeaseRecord::isHeld).isPresent());
        try (ChildJvm second = ChildJvm.start("second", Main.class, "run", "--config", config.toString())) {
          second.awaitLineStartingWith("running", Duration.ofSeconds(60));
          ChildJvm holder = pidOf(leases.read(lease).orElseThrow().owner()) == first.pid() ? first : second;
          ChildJvm peer = holder == first ? second : first;
          for (int i = 0; i < 20; i++) {
            orders.insertOne(new Document("_id", "o" + i));
          }
          await().atMost(Duration.ofSeconds(60)).until(() -> keys(kafka, 20).size() == 20);

          // The checkpoint is due only after 1000 changes or 30 s: only the hand-over commits it.
          var before = leases.read(lease).orElseThrow().checkpoint();
          holder.terminate();
          assertThat(holder.awaitExit(Duration.ofSeconds(30))).as("exit status after SIGTERM").isIn(0, 143);
          LeaseRecord afterExit = leases.read(lease).orElseThrow();
          assertThat(afterExit.owner() == null || pidOf(afterExit.owner()) == peer.pid())
              .as("released on the way out, not left to expire: %s", afterExit).isTrue();
          assertThat(afterExit.checkpoint()).as("what was processed is committed on the way out")
              .isNotNull().isNotEqualTo(before);

          await().atMost(Duration.ofSeconds(20)).until(() -> leases.read(lease)
              .filter(r -> r.isHeld() && pidOf(r.owner()) == peer.pid()).isPresent());
          for (int i = 20; i < 30; i++) {
            orders.insertOne(new Document("_id", "o" + i));
          }
          await().atMost(Duration.ofSeconds(60)).until(() -> keys(kafka, 30).size() == 30);
          Set<String> expected = new HashSet<>();
          for (int i = 0; i < 30; i++) {
            expected.add("o" + i);
          }
          assertThat(keys(kafka, 30)).isEqualTo(expected);
        }
      }
    }
  }

  /** The process id in an owner id ({@code [label/]pid@host/random}). */
  private static long pidOf(String owner) {
    String beforeHost = owner.substring(0, owner.indexOf('@'));
    return Long.parseLong(beforeHost.substring(beforeHost.lastIndexOf('/') + 1));
  }

  private static Set<String> keys(EmbeddedKafka kafka, int count) {
    Set<String> keys = new HashSet<>();
    kafka.readAll("orders", count, Duration.ofSeconds(2)).forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
    return keys;
  }
}
