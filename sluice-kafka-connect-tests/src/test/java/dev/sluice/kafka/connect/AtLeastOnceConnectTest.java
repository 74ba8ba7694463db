package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Without exactly-once support (at least once): a worker killed mid-stream and another added lose
 * nothing and keep per-key order (duplicates allowed, as replays of a suffix). The same three-worker
 * cluster then shows the value's schema working with the JSON converter (schemas on) and a standard
 * SMT, heartbeats advancing the offset of a partition that gets no changes, the history-lost
 * policies fail, skip and resnapshot, parking of a change Sluice cannot decode, a startup snapshot,
 * and a changed partition count. The tests that edit or trim the oplog (history loss, parking)
 * use the embedded server, the only one that allows it; the others run on the deployment under
 * test ({@code -Dsluice.mongodb.uri} or the embedded server).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class AtLeastOnceConnectTest {
  private static EmbeddedKafka kafka;
  /** The deployment under test (-Dsluice.mongodb.uri or the embedded server) and a fresh database on it. */
  private static InMemoryMongo mongo;
  private static MongoClient client;
  private static String db;
  /** The embedded server, for the tests that edit or trim its oplog (a real deployment allows neither). */
  private static EmbeddedMongo kit;
  private static MongoClient kitClient;
  private static ConnectCluster cluster;
  private static ChildJvm doomed;
  private static final ObjectMapper JSON = new ObjectMapper();

  @BeforeAll
  static void servers() {
    kafka = SharedServers.kafka();
    mongo = SharedServers.mongo();
    client = mongo.client();
    db = mongo.freshDatabase().getName();
    kit = SharedServers.embeddedMongo();
    kitClient = kit.client();
    cluster = new ConnectCluster(kafka.bootstrapServers(), "alo", false);
    doomed = cluster.startChildWorker("alo-worker-1");
    cluster.startWorker();
    cluster.startWorker();
  }

  @AfterAll
  static void close() {
    cluster.close();
    kitClient.close();
  }

  @Test
  @Order(1)
  void aKilledWorkerLosesNothingAndKeepsPerKeyOrder() throws Exception {
    client.getDatabase(db).createCollection("orders");
    MongoCollection<Document> orders = client.getDatabase(db).getCollection("orders");
    KeyedWrites writes = new KeyedWrites(orders, 6);
    String topic = "sluice." + db + ".orders";

    Map<String, String> config = ConnectCluster.connector(mongo.uri(), db, "orders", 4, 4);
    // The value's schema with the JSON converter (schemas on) and a standard SMT that needs it.
    config.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
    config.put("value.converter.schemas.enable", "true");
    config.put("transforms", "origin");
    config.put("transforms.origin.type", "org.apache.kafka.connect.transforms.InsertField$Value");
    config.put("transforms.origin.static.field", "origin");
    config.put("transforms.origin.static.value", "sluice");
    cluster.putConnectorWithTasksOn(doomed, "orders", config, 4);

    cluster.killWorkerMidStream(doomed, "orders", 4, writes, topic, 60, 60);
    writes.assertNothingLostInOrder(KeyedWrites.read(kafka.bootstrapServers(), topic));

    JsonNode first = KeyedWrites.values(kafka.bootstrapServers(), topic).get(0);
    assertThat(first.path("schema").path("name").asText()).isEqualTo("dev.sluice.kafka.connect.Change");
    assertThat(first.path("payload").path("origin").asText()).as("field added by the SMT").isEqualTo("sluice");
    assertThat(first.path("payload").path("stream").asText()).isEqualTo(db + ".orders");
    assertThat(first.path("payload").path("envelope").asText()).isEqualTo("sluice/1");
  }

  @Test
  @Order(2)
  void heartbeatsAdvanceTheOffsetOfAPartitionWithoutChanges() {
    client.getDatabase(db).createCollection("quiet");
    MongoCollection<Document> quiet = client.getDatabase(db).getCollection("quiet");
    Map<String, String> config = ConnectCluster.connector(mongo.uri(), db, "quiet", 2, 1);
    config.put("topic.prefix", "hb");
    config.put("heartbeat.interval.ms", "200");
    config.put("heartbeat.topic", "hb-heartbeats");
    cluster.putConnector("quiet", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("quiet", 1));

    List<String> partitionZeroKeys = new ArrayList<>();
    for (int i = 0; partitionZeroKeys.size() < 20; i++) {
      if (PartitionSpec.indexOf("q" + i, 2) == 0) {
        partitionZeroKeys.add("q" + i);
      }
    }
    String pinned = partitionOneOffset();
    for (String k : partitionZeroKeys) {
      quiet.insertOne(new Document("_id", k));
    }
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), "hb." + db + ".quiet").size() == 20);
    // Partition 1 got none of these changes, yet its committed offset moves past them by heartbeats.
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      String now = partitionOneOffset();
      return now != null && !now.equals(pinned);
    });
    List<JsonNode> beats = KeyedWrites.values(kafka.bootstrapServers(), "hb-heartbeats");
    assertThat(beats).anySatisfy(b -> {
      assertThat(b.path("partition").asInt()).isEqualTo(1);
      assertThat(b.path("position").asText()).isEqualTo(partitionOneOffset());
    });
    assertThat(KeyedWrites.keys(kafka.bootstrapServers(), "hb." + db + ".quiet")).containsExactlyInAnyOrderElementsOf(partitionZeroKeys);
  }

  /**
   * Until nothing reads for {@code connector}. Its STOPPED state and an empty task list in the REST
   * status come before its task has stopped (a task read changes written after both, in one full
   * run). The workers left after the first test all run in this JVM, and Connect names a task's
   * thread {@code task-thread-<connector>-<n>} while the task runs (giving the pool thread its name
   * back when it ends), so no thread of that name means no task is left.
   */
  private static void awaitStopped(String connector) {
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      JsonNode status = cluster.get("/connectors/" + connector + "/status");
      return "STOPPED".equals(status.path("connector").path("state").asText())
          && status.path("tasks").isEmpty()
          && Thread.getAllStackTraces().keySet().stream()
              .noneMatch(t -> t.getName().startsWith("task-thread-" + connector + "-"));
    });
  }

  private static String partitionOneOffset() {
    for (JsonNode o : cluster.get("/connectors/quiet/offsets").path("offsets")) {
      if (o.path("partition").path("partition").asInt() == 1) {
        return o.path("offset").path("position").asText();
      }
    }
    return null;
  }

  @Test
  @Order(3)
  void lostHistoryFailsTheTaskSayingWhatToDoAndSkipContinuesAtTheLatestPosition() {
    kitClient.getDatabase("alo").createCollection("fragile");
    MongoCollection<Document> fragile = kitClient.getDatabase("alo").getCollection("fragile");
    String topic = "sluice.alo.fragile";
    Map<String, String> config = ConnectCluster.connector(kit.connectionString(), "alo", "fragile", 1, 1);
    cluster.putConnector("fragile", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("fragile", 1));
    for (int i = 0; i < 5; i++) {
      fragile.insertOne(new Document("_id", "a" + i));
    }
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), topic).size() == 5);

    cluster.put("/connectors/fragile/stop", null);
    awaitStopped("fragile");
    for (int i = 0; i < 5; i++) {
      fragile.insertOne(new Document("_id", "b" + i)); // written while stopped, then lost from the oplog
    }
    assertThat(kit.loseHistoryUpToNow()).isPositive();
    assertThat(KeyedWrites.keys(kafka.bootstrapServers(), topic)).as("nothing read while stopped")
        .containsExactlyInAnyOrder("a0", "a1", "a2", "a3", "a4");

    cluster.put("/connectors/fragile/resume", null);
    await().atMost(Duration.ofSeconds(60)).until(() -> {
      JsonNode tasks = cluster.get("/connectors/fragile/status").path("tasks");
      return tasks.size() == 1 && "FAILED".equals(tasks.get(0).path("state").asText());
    });
    String trace = cluster.get("/connectors/fragile/status").path("tasks").get(0).path("trace").asText();
    assertThat(trace).contains("History lost", "history.lost.policy=fail", "no change was skipped",
        "history.lost.policy=skip");

    config.put("history.lost.policy", "skip");
    cluster.reconfigureAndRestart("fragile", config, "includeTasks=true&onlyFailed=true");
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("fragile", 1));
    for (int i = 0; i < 3; i++) {
      fragile.insertOne(new Document("_id", "c" + i));
    }
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), topic).size() >= 8);
    Set<String> keys = new HashSet<>(KeyedWrites.keys(kafka.bootstrapServers(), topic));
    assertThat(keys).containsExactlyInAnyOrder("a0", "a1", "a2", "a3", "a4", "c0", "c1", "c2");
  }

  @Test
  @Order(4)
  void anUndecodableChangeIsParkedWithTheLaterChangesOfItsKeyOtherKeysGoOnAndATaskRestartKeepsParking() {
    kitClient.getDatabase("alo").createCollection("poison");
    MongoCollection<Document> poison = kitClient.getDatabase("alo").getCollection("poison");
    String topic = "sluice.alo.poison";
    String parkedTopic = "alo-parked";
    Map<String, String> config = ConnectCluster.connector(kit.connectionString(), "alo", "poison", 1, 1);
    config.put("undecodable.policy", "park");
    config.put("parked.topic", parkedTopic);
    cluster.putConnector("poison", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("poison", 1));
    KeyedWrites writes = new KeyedWrites(poison, 3); // k0, k1, k2: all in the one partition
    writes.round();
    await().atMost(Duration.ofSeconds(30)).until(() -> writes.complete(KeyedWrites.read(kafka.bootstrapServers(), topic)));

    // Stopped, so that no task reads k1's next change before it is made undecodable.
    cluster.put("/connectors/poison/stop", null);
    awaitStopped("poison");
    writes.round(); // seq 2
    makeUndecodable("alo.poison", "k1");
    cluster.put("/connectors/poison/resume", null);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("poison", 1)
        && KeyedWrites.values(kafka.bootstrapServers(), parkedTopic).size() >= 1
        && seqs(KeyedWrites.read(kafka.bootstrapServers(), topic), "k2").contains(2));
    writes.round(); // seq 3: k1's goes to the parked topic behind its undecodable change
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.values(kafka.bootstrapServers(), parkedTopic).size() >= 2
        && seqs(KeyedWrites.read(kafka.bootstrapServers(), topic), "k2").contains(3));

    // The parked key travels in the committed offset: a restarted task parks k1 still.
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      JsonNode offsets = cluster.get("/connectors/poison/offsets").path("offsets");
      return offsets.size() == 1 && offsets.get(0).path("offset").path("parked").asText().contains("k1");
    });
    cluster.call("POST", "/connectors/poison/tasks/0/restart", null);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("poison", 1));
    writes.round(); // seq 4
    await().atMost(Duration.ofSeconds(30)).until(() -> seqs(KeyedWrites.read(kafka.bootstrapServers(), topic), "k2").contains(4)
        && parkedSeqs(KeyedWrites.values(kafka.bootstrapServers(), parkedTopic)).contains(4));

    Map<String, List<Integer>> published = KeyedWrites.read(kafka.bootstrapServers(), topic);
    assertThat(distinct(published.get("k0"))).as("k0 goes on").containsExactly(1, 2, 3, 4);
    assertThat(distinct(published.get("k2"))).as("k2 goes on").containsExactly(1, 2, 3, 4);
    assertThat(published.get("k1")).as("nothing of k1 after its undecodable change").containsOnly(1);

    List<JsonNode> parked = KeyedWrites.values(kafka.bootstrapServers(), parkedTopic);
    assertThat(parked).allSatisfy(p -> {
      assertThat(p.path("key").asText()).isEqualTo("k1");
      assertThat(p.path("stream").asText()).isEqualTo("alo.poison");
    });
    assertThat(parked.get(0).path("reason").asText()).contains("cannot be decoded", "updateDescription");
    assertThat(parked.get(0).path("raw").asText()).contains("k1");
    assertThat(parked.subList(1, parked.size())).isNotEmpty().allSatisfy(p ->
        assertThat(p.path("reason").asText()).contains("an earlier change of key 'k1' is parked"));
    assertThat(distinct(parkedSeqs(parked))).as("k1's later changes, in order, after the restart too")
        .containsExactly(3, 4);
    assertThat(cluster.running("poison", 1)).as("parking never failed the task").isTrue();
  }

  @Test
  @Order(5)
  void resnapshotRepublishesTheDocumentsWhoseChangesWereLostWithTheHistory() {
    kitClient.getDatabase("alo").createCollection("mended");
    MongoCollection<Document> mended = kitClient.getDatabase("alo").getCollection("mended");
    String topic = "sluice.alo.mended";
    Map<String, String> config = ConnectCluster.connector(kit.connectionString(), "alo", "mended", 2, 1);
    config.put("history.lost.policy", "resnapshot");
    cluster.putConnector("mended", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("mended", 1));
    for (int i = 0; i < 4; i++) {
      mended.insertOne(new Document("_id", "a" + i).append("v", 1));
    }
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), topic).size() == 4);

    cluster.put("/connectors/mended/stop", null);
    awaitStopped("mended");
    for (int i = 0; i < 4; i++) {
      mended.insertOne(new Document("_id", "b" + i).append("v", 1)); // their changes are lost below
    }
    mended.updateOne(new Document("_id", "a0"), new Document("$set", new Document("v", 2)));
    mended.deleteOne(new Document("_id", "a1"));
    assertThat(kit.loseHistoryUpToNow()).isPositive();

    cluster.put("/connectors/mended/resume", null);
    // Every document that exists now comes again as a SNAPSHOT change, in both partitions; the
    // lost delete cannot be told (a snapshot shows what exists), which the GAP log says.
    await().atMost(Duration.ofSeconds(60)).until(() -> snapshotKeys(topic).size() == 7);
    assertThat(snapshotKeys(topic)).containsExactlyInAnyOrder("a0", "a2", "a3", "b0", "b1", "b2", "b3");
    assertThat(KeyedWrites.values(kafka.bootstrapServers(), topic).stream()
        .filter(v -> v.path("operation").asText().equals("SNAPSHOT") && v.path("key").asText().equals("a0"))
        .map(v -> v.path("document").asText())).singleElement().asString().contains("\"v\": 2");
    mended.insertOne(new Document("_id", "c0"));
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), topic).contains("c0"));
    assertThat(cluster.running("mended", 1)).isTrue();
  }

  @Test
  @Order(6)
  void startupSnapshotPublishesTheExistingDocumentsThenTheStream() {
    MongoCollection<Document> seeded = client.getDatabase(db).getCollection("seeded");
    for (int i = 0; i < 6; i++) {
      seeded.insertOne(new Document("_id", "s" + i));
    }
    String topic = "sluice." + db + ".seeded";
    Map<String, String> config = ConnectCluster.connector(mongo.uri(), db, "seeded", 2, 2);
    config.put("startup.mode", "snapshot");
    cluster.putConnector("seeded", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> snapshotKeys(topic).size() == 6);
    seeded.insertOne(new Document("_id", "s6"));
    seeded.updateOne(new Document("_id", "s0"), new Document("$set", new Document("after", true)));
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), topic).size() >= 8);
    List<JsonNode> values = KeyedWrites.values(kafka.bootstrapServers(), topic);
    assertThat(snapshotKeys(topic)).containsExactlyInAnyOrder("s0", "s1", "s2", "s3", "s4", "s5");
    assertThat(values).filteredOn(v -> !v.path("operation").asText().equals("SNAPSHOT"))
        .extracting(v -> v.path("operation").asText() + " " + v.path("key").asText())
        .containsExactlyInAnyOrder("INSERT s6", "UPDATE s0");
  }

  @Test
  @Order(7)
  void aChangedPartitionCountFailsNamingBothCountsOrRestartsFromTheOldestCommittedOffset() {
    MongoCollection<Document> resized = client.getDatabase(db).getCollection("resized");
    client.getDatabase(db).createCollection("resized");
    String topic = "sluice." + db + ".resized";
    Map<String, String> config = ConnectCluster.connector(mongo.uri(), db, "resized", 2, 2);
    cluster.putConnector("resized", config);
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("resized", 2));
    for (int i = 0; i < 5; i++) {
      resized.insertOne(new Document("_id", "r" + i));
    }
    await().atMost(Duration.ofSeconds(30)).until(() -> KeyedWrites.keys(kafka.bootstrapServers(), topic).size() == 5);
    await().atMost(Duration.ofSeconds(30)).until(() -> cluster.get("/connectors/resized/offsets").path("offsets").size() == 2);

    config.put("partitions", "3");
    cluster.putConnector("resized", config);
    await().atMost(Duration.ofSeconds(60)).until(() ->
        "FAILED".equals(cluster.get("/connectors/resized/status").path("connector").path("state").asText()));
    assertThat(cluster.get("/connectors/resized/status").path("connector").path("trace").asText())
        .contains("has committed offsets for 2 partitions", "partitions is 3", "restart-from-oldest-offset");
    for (int i = 5; i < 8; i++) {
      resized.insertOne(new Document("_id", "r" + i)); // while no task reads
    }

    config.put("partitions.change", "restart-from-oldest-offset");
    cluster.reconfigureAndRestart("resized", config, "includeTasks=true");
    await().atMost(Duration.ofSeconds(60)).until(() -> cluster.running("resized", 2)); // 3 partitions, tasks.max 2
    resized.insertOne(new Document("_id", "r8"));
    await().atMost(Duration.ofSeconds(30)).until(() -> new HashSet<>(KeyedWrites.keys(kafka.bootstrapServers(), topic))
        .size() == 9);
    assertThat(new HashSet<>(KeyedWrites.keys(kafka.bootstrapServers(), topic))).as("nothing lost")
        .containsExactlyInAnyOrder("r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8");
    JsonNode offsets = cluster.get("/connectors/resized/offsets").path("offsets");
    assertThat(offsets).anySatisfy(o -> assertThat(o.path("partition").path("partitions").asInt()).isEqualTo(3));
  }

  /** The keys of the SNAPSHOT changes in {@code topic}. */
  private static List<String> snapshotKeys(String topic) {
    return KeyedWrites.values(kafka.bootstrapServers(), topic).stream()
        .filter(v -> v.path("operation").asText().equals("SNAPSHOT")).map(v -> v.path("key").asText()).toList();
  }

  /**
   * Takes the update description out of the oplog entry of {@code key}'s one update, before any task
   * read it: its change event then has a position but no content Sluice can decode (an update
   * without {@code updateDescription}), as a server format Sluice does not know would.
   */
  private static void makeUndecodable(String namespace, String key) {
    MongoCollection<BsonDocument> oplog = kitClient.getDatabase("local").getCollection("oplog.rs", BsonDocument.class);
    List<BsonDocument> entries = oplog.find(new Document("ns", namespace).append("op", "u").append("o2._id", key))
        .into(new ArrayList<>());
    assertThat(entries).as("the oplog entries of %s's updates", key).hasSize(1);
    BsonDocument entry = entries.get(0);
    assertThat(oplog.updateOne(new Document("ts", entry.getTimestamp("ts")),
        new Document("$unset", new Document("sluiceUpdateDescription", ""))).getModifiedCount()).isEqualTo(1);
  }

  private static List<Integer> seqs(Map<String, List<Integer>> read, String key) {
    return read.getOrDefault(key, List.of());
  }

  /** The seq of each parked change that has one (the changes parked behind the undecodable one). */
  private static List<Integer> parkedSeqs(List<JsonNode> parked) {
    List<Integer> out = new ArrayList<>();
    for (JsonNode p : parked) {
      try {
        JsonNode seq = JSON.readTree(p.path("raw").asText()).path("updateDescription").path("updatedFields")
            .path("seq");
        if (seq.isNumber()) {
          out.add(seq.asInt());
        }
      } catch (java.io.IOException e) {
        throw new IllegalStateException(e);
      }
    }
    return out;
  }

  /** The first occurrence of each value, in order: an at-least-once replay of a suffix collapses. */
  private static List<Integer> distinct(List<Integer> values) {
    return values == null ? List.of() : values.stream().distinct().toList();
  }
}
