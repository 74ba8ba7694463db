package dev.sluice.mongodb.errors;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.mongo.FailCommand;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 32 section 2: every row of {@code docs/mongodb-errors.md} (a command Sluice sends, an
 * answer a real server gives, the one outcome) is made to happen with MongoDB's {@code failCommand}
 * fail point and its outcome checked on a running listener. A row without a scenario, or with
 * another outcome, fails. Runs against a real replica set with {@code -Dsluice.mongodb.uri} (test
 * commands enabled).
 */
class ErrorCatalogueTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private static final Duration WAIT = Duration.ofSeconds(30);

  /** One row of the table. */
  record Row(String id, String surface, String command, String answers, String outcome, String says) {
    @Override
    public String toString() {
      return id + " " + surface + " " + command + " answers " + answers + ": " + outcome;
    }
  }

  static List<Row> rows() throws IOException {
    Path doc = catalogue();
    List<Row> rows = new ArrayList<>();
    boolean inTable = false;
    for (String line : Files.readAllLines(doc)) {
      if (line.startsWith("| id | surface |")) {
        inTable = true;
        continue;
      }
      if (!inTable || line.startsWith("|---")) {
        continue;
      }
      if (!line.startsWith("|")) {
        if (!rows.isEmpty()) {
          break;
        }
        continue;
      }
      String[] cells = line.substring(1, line.lastIndexOf('|')).split("\\|");
      if (cells.length != 6) {
        throw new AssertionError("a catalogue row must have 6 cells: " + line);
      }
      rows.add(new Row(cells[0].trim(), cells[1].trim(), cells[2].trim(), cells[3].trim(), cells[4].trim(),
          cells[5].trim()));
    }
    return rows;
  }

  private static Path catalogue() {
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      Path doc = dir.resolve("docs").resolve("mongodb-errors.md");
      if (Files.exists(doc)) {
        return doc;
      }
    }
    throw new AssertionError("docs/mongodb-errors.md not found above " + Path.of("").toAbsolutePath());
  }

  @Test
  void theTableIsThereAndItsIdsAreUnique() throws IOException {
    List<Row> rows = rows();
    assertThat(rows).hasSizeGreaterThan(30);
    assertThat(rows.stream().map(Row::id).distinct().count()).isEqualTo(rows.size());
    assertThat(rows).allSatisfy(r -> assertThat(r.outcome()).isIn("resumed", "retried", "history-lost", "stopped"));
  }

  /**
   * Every row; {@code -Dsluice.catalogue.rows=F05,L07} runs only those (to look at one row against
   * a real deployment). Unset, as in the build, every row runs.
   */
  @TestFactory
  Stream<DynamicTest> everyRowHasItsOutcome() throws IOException {
    String only = System.getProperty("sluice.catalogue.rows", "");
    List<String> ids = only.isBlank() ? List.of() : List.of(only.split("\\s*,\\s*"));
    return rows().stream().filter(r -> ids.isEmpty() || ids.contains(r.id()))
        .map(r -> DynamicTest.dynamicTest(r.toString(), () -> new Scenario(r).run()));
  }

  /** One row, run on a listener of its own, in a database of its own. */
  private static final class Scenario {
    private final Row row;
    private final String tag = UUID.randomUUID().toString().substring(0, 8);
    private final String feedApp;
    private final String leaseApp;
    private final String deadLetterApp;
    private final List<String> seen = new CopyOnWriteArrayList<>();
    /** For dead-letter rows: the store the change of key c, which the handler refuses, is parked in. */
    private MongoDeadLetterStore deadLetters;

    Scenario(Row row) {
      this.row = row;
      this.feedApp = "feed-" + row.id() + "-" + tag;
      this.leaseApp = "lease-" + row.id() + "-" + tag;
      this.deadLetterApp = "dlq-" + row.id() + "-" + tag;
    }

    /** A row about images: the feed requires pre-images, of a collection that records them. */
    private boolean imagesRequired() {
      return row.answers().equals("errorCode 47");
    }

    private boolean parking() {
      return row.surface().equals("dead-letters");
    }

    void run() {
      MongoDatabase data = MONGO.freshDatabase();
      try (MongoClient feedClient = client(feedApp); MongoClient leaseClient = client(leaseApp);
          MongoClient deadLetterClient = client(deadLetterApp)) {
        if (parking()) {
          deadLetters = MongoDeadLetterStore.create(deadLetterClient.getDatabase(data.getName()), "deadletters");
        }
        insert(data, "a");
        if (imagesRequired()) {
          data.runCommand(new org.bson.Document("collMod", "orders")
              .append("changeStreamPreAndPostImages", new org.bson.Document("enabled", true)));
        }
        insert(data, "b");
        // When the command is sent: at the first start (acquisition, the layout check), when a
        // listener restarts at its checkpoint (the change stream's aggregate), or while it runs.
        String when = switch (row.surface() + " " + row.command()) {
          case "lease findAndModify", "lease find", "dead-letters find", "snapshot find", "feed hello", "feed find" -> "start";
          case "feed aggregate" -> "restart";
          case "feed getMore", "lease update", "dead-letters insert" -> "running";
          default -> throw new AssertionError("no scenario for " + row.surface() + " " + row.command()
              + " (row " + row.id() + "): add one to ErrorCatalogueTest");
        };
        FailCommand failure = failure(data.getName());
        FailCommand.Armed armed = null;
        try {
          if (when.equals("start")) {
            armed = failure.enable(MONGO.client());
          } else if (when.equals("restart")) {
            try (Listener<BsonDocument> first = listener(feedClient, leaseClient, data.getName())) {
              awaitDelivered(first);
            }
            armed = failure.enable(MONGO.client());
          }
          try (Listener<BsonDocument> listener = listener(feedClient, leaseClient, data.getName())) {
            Object committedBefore = null;
            if (when.equals("running")) {
              awaitDelivered(listener);
              committedBefore = status(listener).committed();
              armed = failure.enable(MONGO.client());
            }
            check(listener, armed, data, committedBefore);
          }
        } finally {
          if (armed != null) {
            armed.close();
          }
        }
      }
    }

    /** Until a and b were delivered and b's checkpoint committed. */
    private void awaitDelivered(Listener<BsonDocument> listener) {
      await().atMost(WAIT).until(() -> seen.containsAll(List.of("a", "b"))
          && status(listener).committed() != null && status(listener).processed() == 2);
    }

    private FailCommand failure(String database) {
      String app = switch (row.surface()) {
        case "feed", "snapshot" -> feedApp;
        case "lease" -> leaseApp;
        default -> deadLetterApp;
      };
      FailCommand f = FailCommand.on(row.command()).appName(app);
      if (row.surface().equals("snapshot")) {
        f = f.namespace(database + ".orders"); // the snapshot's reads, not the oplog's
      }
      String[] words = row.answers().split("\\s+");
      switch (words[0]) {
        case "closeConnection" -> f = f.closeConnection();
        case "errorCode" -> {
          f = f.errorCode(Integer.parseInt(words[1]));
          if (words.length > 3 && words[2].equals("+")) {
            f = f.errorLabels(words[3]);
          }
        }
        case "writeConcernError" ->
            f = f.writeConcernError(Integer.parseInt(words[1]), "waiting for replication timed out");
        default -> throw new AssertionError("unknown answer '" + row.answers() + "' in row " + row.id());
      }
      // A server that refuses a command refuses it every time; a resumable error happens once. (A
      // refusal answered once could be met by a call that tolerates it, such as the oplog read for
      // the status's history, and never reach the command the row is about.)
      return row.outcome().equals("resumed") ? f.times(1) : f.alwaysOn();
    }

    private void check(Listener<BsonDocument> listener, FailCommand.Armed armed, MongoDatabase data,
        Object committedBefore) {
      switch (row.outcome()) {
        case "resumed" -> {
          insert(data, "c");
          insert(data, "d");
          armed.awaitFired(1, WAIT);
          await().atMost(WAIT).until(() -> seen.contains("d"));
          assertThat(seen).as("resumed from the driver's last token: nothing lost or repeated")
              .containsExactly("a", "b", "c", "d");
          PartitionStatus s = status(listener);
          assertThat(s.state()).isEqualTo(PartitionState.ACTIVE);
          assertThat(s.error()).as("the driver resumed; Sluice saw nothing").isNull();
        }
        case "retried" -> {
          if (parking()) {
            insert(data, "c"); // refused by the handler: the fail point meets its parking
          }
          armed.awaitFired(1, WAIT);
          if (!parking()) {
            insert(data, "c");
          }
          if (parking() && row.answers().startsWith("writeConcernError")) {
            // The change was stored, unconfirmed: the next try finds it parked and stores nothing,
            // so there is no second failure to count; the status keeps the error it recovered from.
            await().atMost(WAIT).until(() -> deadLetters.listKey("g/" + data.getName() + ".orders", "c").size() == 1
                && status(listener).state() == PartitionState.ACTIVE);
            assertThat(status(listener).error()).contains(row.says());
          } else {
            awaitRetrying(listener);
            armed.awaitFired(3, WAIT);
          }
          armed.close();
          insert(data, "d");
          await().atMost(WAIT).until(() -> seen.contains("d") && status(listener).state() == PartitionState.ACTIVE
              && status(listener).attempts() == 0);
          if (parking()) {
            assertThat(new ArrayList<>(new LinkedHashSet<>(seen))).as("every change but the refused one, in order")
                .containsExactly("a", "b", "d");
            assertThat(deadLetters.listKey("g/" + data.getName() + ".orders", "c"))
                .as("the refused change parked once, however often parking was tried").hasSize(1);
          } else {
            assertThat(new ArrayList<>(new LinkedHashSet<>(seen))).as("every change, in order, at least once")
                .containsExactly("a", "b", "c", "d");
          }
          assertThat(status(listener).nextAttemptAt()).isNull();
        }
        case "history-lost", "stopped" -> {
          insert(data, "c");
          armed.awaitFired(1, WAIT);
          await().atMost(WAIT).until(() -> status(listener).state() == PartitionState.FAILED);
          PartitionStatus s = status(listener);
          assertThat(s.error()).contains(row.says());
          if (row.outcome().equals("history-lost")) {
            assertThat(s.error()).containsIgnoringCase("history").contains("no change was skipped");
          }
          if (row.surface().equals("feed")) {
            assertThat(seen).as("a stopped partition delivers nothing past the failure: a restart after the fix"
                + " resumes before c").doesNotContain("c");
          } else if (committedBefore != null) {
            assertThat(s.committed()).as("the checkpoint did not move past b: a restart delivers c again")
                .isEqualTo(committedBefore);
          }
        }
        default -> throw new AssertionError("unknown outcome " + row.outcome());
      }
    }

    /** Until the partition shows the failure it retries: the error, two attempts, the next try. */
    private void awaitRetrying(Listener<BsonDocument> listener) {
      await().atMost(WAIT).untilAsserted(() -> {
        PartitionStatus s = status(listener);
        if (row.says().equals("-")) {
          assertThat(s.state()).isEqualTo(PartitionState.ACQUIRING);
          assertThat(s.epoch()).isZero();
        } else {
          assertThat(s.state()).isIn(PartitionState.RETRYING, PartitionState.ACQUIRING);
          assertThat(s.error()).contains(row.says());
          assertThat(s.attempts()).isGreaterThanOrEqualTo(2);
          assertThat(s.nextAttemptAt()).isNotNull();
        }
      });
    }

    private Listener<BsonDocument> listener(MongoClient feedClient, MongoClient leaseClient, String database) {
      MongoChangeFeed.Builder feed = MongoChangeFeed.builder(feedClient, database, "orders");
      if (imagesRequired()) {
        feed.fullDocumentBeforeChange(com.mongodb.client.model.changestream.FullDocumentBeforeChange.REQUIRED);
      }
      Listener.Builder<BsonDocument> b = Listener.builder(feed.build(),
          MongoLeaseStore.builder(leaseClient.getDatabase(database)).build());
      if (parking()) {
        b.onFailure(FailurePolicy.park(
            RetryPolicy.attempts(1, Duration.ofMillis(10), Duration.ofMillis(10)), deadLetters));
      }
      return b
          .group("g")
          .leaseDuration(Duration.ofSeconds(10))
          .acquireInterval(Duration.ofMillis(100))
          .pollWait(Duration.ofMillis(50))
          .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
          .bootstrap(row.surface().equals("snapshot") ? BootstrapPolicy.snapshot() : BootstrapPolicy.oldest())
          .handler((change, fence) -> {
            if (parking() && change.key().equals("c")) {
              throw new IllegalStateException("the handler refuses c");
            }
            seen.add(change.key());
          })
          .build()
          .start();
    }

    private static PartitionStatus status(Listener<?> l) {
      return l.status().get(0);
    }

    private static void insert(MongoDatabase db, String id) {
      db.getCollection("orders", BsonDocument.class).insertOne(new BsonDocument("_id", new BsonString(id)));
    }

    private static MongoClient client(String app) {
      return MongoClients.create(MongoClientSettings.builder()
          .applyConnectionString(new ConnectionString(MONGO.connectionString()))
          .applicationName(app)
          .applyToClusterSettings(b -> b.serverSelectionTimeout(5, TimeUnit.SECONDS))
          .applyToSocketSettings(b -> b.connectTimeout(2, TimeUnit.SECONDS).readTimeout(10, TimeUnit.SECONDS))
          .build());
    }
  }
}
