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
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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

      // Each with the service's own logging (not the tests'): the first in JSON, the second in text.
      try (ChildJvm first = ChildJvm.start("first", List.of("-Dlogback.configurationFile=logback.xml",
          "-DSLUICE_LOG_FORMAT=json"), Main.class, "run", "--config", config.toString())) {
        await().atMost(Duration.ofSeconds(60)).until(() -> leases.read(lease).filter(LeaseRecord::isHeld).isPresent());
        try (ChildJvm second = ChildJvm.start("second", List.of("-Dlogback.configurationFile=logback.xml"),
            Main.class, "run", "--config", config.toString())) {
          second.awaitLineStartingWith("running", Duration.ofSeconds(60));
          ChildJvm holder = pidOf(leases.read(lease).orElseThrow().owner()) == first.pid() ? first : second;
          ChildJvm peer = holder == first ? second : first;
          for (int i = 0; i < 20; i++) {
            orders.insertOne(new Document("_id", "o" + i));
          }
          await().atMost(Duration.ofSeconds(60)).until(() -> keys(kafka, 20).size() == 20);

          long firstEpoch = leases.read(lease).orElseThrow().epoch();
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
          // Issue 12 item 6: one line per lifecycle event, with the partition's facts as fields.
          long epoch = leases.read(lease).orElseThrow().epoch();
          String stream = shop + ".orders";
          assertThat(lifecycle(holder, holder == first)).as("the holder's lifecycle lines")
              .contains("started stream=" + stream + " group=kafka-orders",
                  "acquired stream=" + stream + " group=kafka-orders partition=0/1 epoch=" + firstEpoch,
                  "released stream=" + stream + " group=kafka-orders partition=0/1",
                  "stopped stream=" + stream + " group=kafka-orders");
          await().atMost(Duration.ofSeconds(10)).until(() -> lifecycle(peer, peer == first).contains(
              "took-over stream=" + stream + " group=kafka-orders partition=0/1 epoch=" + epoch));
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

  /**
   * The lifecycle lines a service printed, each as {@code event key=value ...} (stream, group,
   * partition, epoch; owner left out), read from JSON lines or from {@code key="value"} text.
   */
  private static List<String> lifecycle(ChildJvm service, boolean json) {
    List<String> events = new ArrayList<>();
    for (String line : service.output()) {
      Map<String, String> fields = new LinkedHashMap<>();
      String event;
      if (json) {
        if (!line.startsWith("{")) {
          continue;
        }
        try {
          JsonNode node = new ObjectMapper().readTree(line);
          if (!"dev.sluice.lifecycle".equals(node.path("logger_name").asText())) {
            continue;
          }
          event = node.path("message").asText().split(" ", 2)[0]; // the event, then its facts
          for (String key : List.of("stream", "group", "partition", "epoch")) {
            if (node.has(key)) {
              fields.put(key, node.get(key).asText());
            }
          }
        } catch (java.io.IOException e) {
          throw new AssertionError("not a JSON line: " + line, e);
        }
      } else {
        Matcher m = Pattern.compile("lifecycle - (\\S+)(.*)").matcher(line);
        if (!m.find()) {
          continue;
        }
        event = m.group(1);
        Matcher kv = Pattern.compile("(\\w+)=\"([^\"]*)\"").matcher(m.group(2));
        while (kv.find()) {
          if (List.of("stream", "group", "partition", "epoch").contains(kv.group(1))) {
            fields.put(kv.group(1), kv.group(2));
          }
        }
      }
      StringBuilder s = new StringBuilder(event);
      fields.forEach((k, v) -> s.append(' ').append(k).append('=').append(v));
      events.add(s.toString());
    }
    return events;
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
