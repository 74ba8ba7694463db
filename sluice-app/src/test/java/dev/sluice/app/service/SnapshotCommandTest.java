package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.app.Main;
import dev.sluice.feed.Operation;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code sluice snapshot} (issue 14 item 2): asks a running listener's group, named as in the
 * configuration file, to read an {@code _id} range again, waits showing the progress until every
 * partition is done, and shows it again later; a group the file does not have is an error naming
 * the configured ones.
 */
class SnapshotCommandTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String db = "snapshotcli";
  private Listener<BsonDocument> listener;

  @AfterEach
  void stop() {
    if (listener != null) {
      listener.close();
    }
  }

  @Test
  void requestsARangeWaitsUntilEveryPartitionIsDoneAndShowsTheProgress(@TempDir Path dir) throws Exception {
    List<Document> docs = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      docs.add(new Document("_id", i).append("version", 1L));
    }
    MONGO.client().getDatabase(db).getCollection("orders").insertMany(docs);
    Set<String> reread = ConcurrentHashMap.newKeySet();
    AtomicInteger delivered = new AtomicInteger();
    listener = Listener.builder(MongoChangeFeed.builder(MONGO.client(), db, "orders")
                .snapshotRequestInterval(Duration.ofMillis(200)).build(),
            MongoLeaseStore.builder(MONGO.client().getDatabase(db)).build())
        .group("orders-resnap").partitions(2).pollWait(Duration.ofMillis(50))
        .acquireInterval(Duration.ofMillis(100)).bootstrap(BootstrapPolicy.oldest())
        .handler((change, fence) -> {
          delivered.incrementAndGet();
          if (change.operation() == Operation.SNAPSHOT) {
            reread.add(change.key());
          }
        })
        .build().start();
    await().atMost(Duration.ofSeconds(30)).until(() -> delivered.get() >= 200);

    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        mongodb:
          uri: %s
          database: %s
        http: { enabled: false }
        listeners:
          - collection: orders
            group: orders-resnap
            partitions: 2
            sink:
              kafka: { bootstrapServers: "localhost:9092", topic: orders }
        """.formatted(MONGO.connectionString(), db));

    CliRun run = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "orders-resnap",
        "--from-id", "10", "--to-id", "59", "--wait");
    assertThat(run.exit()).as(run.err()).isZero();
    assertThat(run.out()).contains("Requested re-snapshot", "_id 10 through 59", "is complete on all 2 partitions");
    Set<String> range = new TreeSet<>();
    for (int i = 10; i <= 59; i++) {
      range.add(Integer.toString(i));
    }
    assertThat(new TreeSet<>(reread)).isEqualTo(range);

    CliRun progress = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "orders-resnap", "--progress");
    assertThat(progress.exit()).as(progress.err()).isZero();
    assertThat(progress.out()).contains("PROGRESS", "0/2", "1/2", "done ", "2 of 2 partitions done");

    CliRun unknown = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "orders-relay");
    assertThat(unknown.exit()).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(unknown.err()).contains("No listener for group 'orders-relay'", "orders (group orders-resnap)");
  }

  @Test
  void aPostgresListenerAndContradictoryOptionsAreRefusedSayingWhatToDoInstead(@TempDir Path dir) throws Exception {
    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        postgres:
          url: jdbc:postgresql://127.0.0.1:1/shop
          user: sluice
          password: s3cret
          publication: shop_pub
        http: { enabled: false }
        listeners:
          - table: public.orders
            sink:
              kafka: { bootstrapServers: "localhost:9092", topic: orders }
        """);
    CliRun postgres = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "kafka-orders");
    assertThat(postgres.exit()).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(postgres.err()).contains("for MongoDB listeners", "sluice replay --from current").doesNotContain("s3cret");

    CliRun both = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "kafka-orders", "--progress", "--wait");
    assertThat(both.exit()).isEqualTo(2);
    assertThat(both.err()).contains("--progress requests nothing");
  }

  @Test
  void aReversedRangeAMalformedIdAndAWaitWithNoMemberRunningAreEachOneClearAnswer(@TempDir Path dir) throws Exception {
    Path config = dir.resolve("sluice.yaml");
    Files.writeString(config, """
        mongodb:
          uri: %s
          database: nomember
        http: { enabled: false }
        listeners:
          - collection: orders
            group: idle-group
            sink:
              kafka: { bootstrapServers: "localhost:9092", topic: orders }
        """.formatted(MONGO.connectionString()));

    CliRun reversed = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "idle-group",
        "--from-id", "200", "--to-id", "100");
    assertThat(reversed.exit()).isEqualTo(Main.EXIT_USAGE);
    assertThat(reversed.err()).contains("--from-id 200 is after --to-id 100", "the range would be empty");

    CliRun malformed = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "idle-group",
        "--from-id", "{\"$oid\": \"not-hex\"}");
    assertThat(malformed.exit()).isEqualTo(Main.EXIT_USAGE);
    assertThat(malformed.err()).contains("--from-id", "is not a valid _id").doesNotContain("\tat ");

    // Nobody runs the group: the wait says so once, and ends at --timeout with exit 1.
    long started = System.nanoTime();
    CliRun waiting = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "idle-group", "--wait",
        "--timeout", "3s");
    assertThat(waiting.exit()).as(waiting.err()).isEqualTo(Main.EXIT_FAILURE);
    assertThat(waiting.out()).contains("No member of group idle-group runs", "is not complete after PT3S (--timeout)",
        "it stays requested");
    assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(60));

    CliRun badTimeout = CliRun.sluice("snapshot", "--config", config.toString(), "--listener", "idle-group", "--wait",
        "--timeout", "soon");
    assertThat(badTimeout.exit()).isEqualTo(Main.EXIT_USAGE);
    assertThat(badTimeout.err()).contains("--timeout", "'soon' is not a duration");
  }
}
