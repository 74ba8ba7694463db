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
import dev.sluice.feed.PartitionSpec;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.inbox.ClaimedElsewhereException;
import dev.sluice.mongodb.inbox.MongoInbox;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.mongodb.view.ViewDefinition;
import com.mongodb.client.model.Updates;
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

  /**
   * The bound of every call of the store or client a row fails (the lease store's and the feed's
   * operation timeout, the client-side {@code timeoutMS} of the dead-letter and handler clients;
   * not the inbox's, see {@link Scenario#run}, nor a feed whose row fails its getMore). Within it
   * the driver retries a retryable answer as often as it can, so with the product's 10 s defaults
   * each failed call of a row that answers "retried" waited 10 s, and a row needs two of them. The
   * outcome of a row does not depend on the bound; the clients whose commands are not failed keep
   * the defaults, so that a slow but healthy call is not cut short.
   */
  private static final Duration FAULT_BOUND = Duration.ofSeconds(2);

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
    assertThat(rows).allSatisfy(r -> assertThat(r.outcome()).isIn("resumed", "retried", "history-lost", "stopped", "thrown", "processed", "expires", "deferred"));
  }

  /**
   * Every row; {@code -Dsluice.catalogue.rows=F05,L07} runs only those (to look at one row against
   * a real deployment). Unset, as in the build, every row runs.
   */
  @TestFactory
  Stream<DynamicTest> everyRowHasItsOutcome() throws IOException {
    String only = System.getProperty("sluice.catalogue.rows", "");
    List<String> ids = only.isBlank() ? List.of() : List.of(only.split("\\s*,\\s*"));
    return rows().stream().filter(r -> ids.isEmpty() || ids.contains(r.id())).filter(this::runsHere)
        .map(r -> DynamicTest.dynamicTest(r.toString(), () -> new Scenario(r).run()));
  }

  /**
   * The surfaces whose rows {@link ErrorCatalogueStoresTest} runs; this class runs every other row,
   * so that the two together run each row once, whatever surfaces the table lists. Two classes, so
   * that the module's two test JVMs share the table's minutes (ADR 0079).
   */
  static final java.util.Set<String> STORE_SURFACES =
      java.util.Set.of("lease", "dead-letters", "view", "fenced", "inbox");

  /** Whether this class runs {@code row}: the change stream's, the snapshot's and the requests' rows. */
  boolean runsHere(Row row) {
    return !STORE_SURFACES.contains(row.surface());
  }

  /** One row, run on a listener of its own, in a database of its own. */
  private static final class Scenario {
    private final Row row;
    private final String tag = UUID.randomUUID().toString().substring(0, 8);
    private final String feedApp;
    private final String leaseApp;
    private final String deadLetterApp;
    /** The client a handler writes with: a view's, a fenced write's, an inbox's commands. */
    private final String handlerApp;
    private final List<String> seen = new CopyOnWriteArrayList<>();
    /** The handler's database, through the handler's client. */
    private MongoDatabase handlerData;
    /** For view rows: the view the handler maintains. */
    private MaterializedView view;
    /** For dead-letter rows: the store the change of key c, which the handler refuses, is parked in. */
    private MongoDeadLetterStore deadLetters;

    Scenario(Row row) {
      this.row = row;
      this.feedApp = "feed-" + row.id() + "-" + tag;
      this.leaseApp = "lease-" + row.id() + "-" + tag;
      this.deadLetterApp = "dlq-" + row.id() + "-" + tag;
      this.handlerApp = "handler-" + row.id() + "-" + tag;
    }

    /** A row about images: the feed requires pre-images, of a collection that records them. */
    private boolean imagesRequired() {
      return row.answers().equals("errorCode 47");
    }

    private boolean parking() {
      return row.surface().equals("dead-letters");
    }

    /** A row about a write the handler makes: it fails the handler, which its retry policy retries. */
    private boolean handlerWrites() {
      return row.surface().equals("view") || row.surface().equals("fenced");
    }

    void run() {
      MongoDatabase data = MONGO.freshDatabase();
      if (row.surface().equals("inbox")) {
        // The driver's defaults: with a client-side timeoutMS the driver retries the answer until
        // the timeout and then throws a timeout that no longer names the answer.
        try (MongoClient handlerClient = client(handlerApp)) {
          inbox(handlerClient.getDatabase(data.getName()), data.getName());
        }
        return;
      }
      if (row.surface().equals("lease") && row.command().equals("delete")) {
        leave(data);
        return;
      }
      if (row.surface().equals("snapshot-requests")) {
        requested(data);
        return;
      }
      try (MongoClient feedClient = client(feedApp); MongoClient leaseClient = client(leaseApp);
          MongoClient deadLetterClient = client(deadLetterApp, FAULT_BOUND);
          MongoClient handlerClient = client(handlerApp, FAULT_BOUND)) {
        handlerData = handlerClient.getDatabase(data.getName());
        if (row.surface().equals("view")) {
          view = MaterializedView.of(handlerData, ViewDefinition.join("order_view").root("orders").build());
        }
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
          case "feed getMore", "lease update", "dead-letters insert", "view update", "view find",
              "view findAndModify", "fenced update" -> "running";
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
        case "feed", "snapshot", "snapshot-requests" -> feedApp;
        case "lease" -> leaseApp;
        case "view", "fenced", "inbox" -> handlerApp;
        default -> deadLetterApp;
      };
      FailCommand f = FailCommand.on(row.command()).appName(app);
      if (row.surface().equals("snapshot")) {
        f = f.namespace(database + ".orders"); // the snapshot's reads, not the oplog's
      }
      if (row.surface().equals("snapshot-requests")) {
        f = f.namespace(database + "." + MongoChangeFeed.DEFAULT_SNAPSHOT_REQUESTS);
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
          boolean meetsChange = parking() || handlerWrites(); // the command is sent for change c
          if (meetsChange) {
            insert(data, "c");
          }
          armed.awaitFired(1, WAIT);
          if (!meetsChange) {
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
        } else if (handlerWrites()) {
          // The handler's retry policy tries the change again in place: RETRYING, then BLOCKED
          // once its attempts are used up; both show the server's answer and the next try.
          assertThat(s.state()).as("the partition's status: %s", s)
              .isIn(PartitionState.RETRYING, PartitionState.BLOCKED);
          assertThat(s.error()).contains(row.says()).contains("key c");
          assertThat(s.attempts()).isGreaterThanOrEqualTo(2);
          assertThat(s.nextAttemptAt()).isNotNull();
        } else {
          assertThat(s.state()).as("the partition's status: %s", s)
              .isIn(PartitionState.RETRYING, PartitionState.ACQUIRING);
          assertThat(s.error()).contains(row.says());
          assertThat(s.attempts()).isGreaterThanOrEqualTo(2);
          assertThat(s.nextAttemptAt()).isNotNull();
        }
      });
    }

    private Listener<BsonDocument> listener(MongoClient feedClient, MongoClient leaseClient, String database) {
      MongoChangeFeed.Builder feed = MongoChangeFeed.builder(feedClient, database, "orders");
      if (!row.command().equals("getMore")) {
        // The stream's reads are not the failed command: a slow healthy getMore is not cut short.
        feed.operationTimeout(FAULT_BOUND);
      }
      if (imagesRequired()) {
        feed.fullDocumentBeforeChange(com.mongodb.client.model.changestream.FullDocumentBeforeChange.REQUIRED);
      }
      Listener.Builder<BsonDocument> b = Listener.builder(feed.build(), leases(leaseClient, database));
      if (parking()) {
        b.onFailure(FailurePolicy.park(
            RetryPolicy.attempts(1, Duration.ofMillis(10), Duration.ofMillis(10)), deadLetters));
      }
      if (handlerWrites()) {
        b.onFailure(FailurePolicy.block(RetryPolicy.attempts(3, Duration.ofMillis(20), Duration.ofMillis(200))));
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
            if (row.surface().equals("view")) {
              view.handler("orders").handle(change, fence);
            } else if (row.surface().equals("fenced")) {
              FencedWrites.updateOne(handlerData.getCollection("targets"), new BsonString(change.key()),
                  Updates.set("seen", true), fence);
            }
            seen.add(change.key());
          })
          .build()
          .start();
    }

    /**
     * An inbox row: the consumer's call meets the server's answer. It throws naming the code and
     * runs the work at most once; once the server answers again the message is processed once.
     */
    private void inbox(MongoDatabase db, String database) {
      MongoInbox inbox = MongoInbox.builder(db, "inbox").claimTimeout(Duration.ofSeconds(2)).build();
      java.util.concurrent.atomic.AtomicInteger ran = new java.util.concurrent.atomic.AtomicInteger();
      if (row.command().equals("find")) {
        // The claim check reads the id's record when the insert meets a claim: a duplicate.
        assertThat(inbox.processIfNew("m0", ran::incrementAndGet)).isTrue();
      }
      String id = row.command().equals("find") ? "m0" : "m1";
      int before = ran.get();
      if (row.outcome().equals("processed")) {
        try (FailCommand.Armed armed = failure(database).enable(MONGO.client())) {
          assertThat(inbox.processIfNew(id, ran::incrementAndGet)).as("the write was applied: the call goes on").isTrue();
          armed.awaitFired(1, WAIT);
        }
        assertThat(ran.get()).isEqualTo(before + 1);
        assertThat(inbox.processed(id)).isTrue();
        assertThat(inbox.processIfNew(id, ran::incrementAndGet)).as("processed once: a later copy is a duplicate").isFalse();
        return;
      }
      try (FailCommand.Armed armed = failure(database).enable(MONGO.client())) {
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> inbox.processIfNew(id, ran::incrementAndGet))
            .as("the call names the server's answer").satisfies(e -> assertThat(messages(e)).contains(row.says()));
        armed.awaitFired(1, WAIT);
      }
      switch (row.command()) {
        case "insert" -> {
          assertThat(ran.get()).as("the claim failed: the work did not run").isEqualTo(before);
          assertThat(inbox.processIfNew(id, ran::incrementAndGet)).as("the redelivery processes it").isTrue();
          assertThat(ran.get()).isEqualTo(before + 1);
        }
        case "find" -> {
          assertThat(ran.get()).as("a duplicate whose record could not be read is not run").isEqualTo(before);
          assertThat(inbox.processIfNew(id, ran::incrementAndGet)).as("the redelivery is known as a duplicate").isFalse();
          assertThat(ran.get()).isEqualTo(before);
        }
        case "update" -> {
          assertThat(ran.get()).as("the work ran; recording it done failed").isEqualTo(before + 1);
          assertThat(inbox.processed(id)).isFalse();
          // Its claim expires after claimTimeout; the redelivery then runs it again (at least once).
          await().atMost(WAIT).pollInterval(Duration.ofMillis(200)).until(() -> {
            try {
              return inbox.processIfNew(id, ran::incrementAndGet);
            } catch (ClaimedElsewhereException stillClaimed) {
              return false;
            }
          });
          assertThat(ran.get()).isEqualTo(before + 2);
        }
        default -> throw new AssertionError("no inbox scenario for " + row.command() + " (row " + row.id() + ")");
      }
      assertThat(inbox.processed(id)).isTrue();
      assertThat(inbox.processIfNew(id, ran::incrementAndGet)).as("processed once: a later copy is a duplicate").isFalse();
    }

    /**
     * A re-snapshot request ({@code MongoChangeFeed.requestSnapshot}) while the partition cannot
     * read the requests ({@code find}) or record that it finished one ({@code update}): the change
     * stream goes on, the status names the server's answer, and once it passes the request is
     * taken up (or recorded done).
     */
    private void requested(MongoDatabase data) {
      try (MongoClient feedClient = client(feedApp); MongoClient leaseClient = client(leaseApp)) {
        insert(data, "a");
        insert(data, "b");
        MongoChangeFeed feed = MongoChangeFeed.builder(feedClient, data.getName(), "orders")
            .fullDocument(com.mongodb.client.model.changestream.FullDocument.UPDATE_LOOKUP)
            .snapshotRequestInterval(Duration.ofMillis(200)).operationTimeout(FAULT_BOUND).build();
        try (Listener<BsonDocument> listener = Listener.builder(feed, leases(leaseClient, data.getName()))
            .group("g")
            .leaseDuration(Duration.ofSeconds(10))
            .acquireInterval(Duration.ofMillis(100))
            .pollWait(Duration.ofMillis(50))
            .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
            .bootstrap(BootstrapPolicy.oldest())
            .handler((change, fence) -> seen.add(change.key()))
            .build()
            .start()) {
          awaitDelivered(listener);
          MongoChangeFeed asker = MongoChangeFeed.builder(MONGO.client(), data.getName(), "orders")
              .fullDocument(com.mongodb.client.model.changestream.FullDocument.UPDATE_LOOKUP).build();
          if (row.outcome().equals("processed")) {
            try (FailCommand.Armed armed = failure(data.getName()).enable(MONGO.client())) {
              asker.requestSnapshot("g", null, null);
              armed.awaitFired(1, WAIT);
              await().atMost(WAIT).until(() -> seen.stream().filter("a"::equals).count() == 2
                  && asker.snapshotRequests("g").stream().allMatch(r -> r.doneBy(PartitionSpec.single())));
            }
            assertThat(status(listener).error()).as("applied: nothing to retry").isNull();
            return;
          }
          try (FailCommand.Armed armed = failure(data.getName()).enable(MONGO.client())) {
            asker.requestSnapshot("g", null, null);
            armed.awaitFired(1, WAIT);
            await().atMost(WAIT).until(() -> String.valueOf(status(listener).error()).contains(row.says()));
            insert(data, "c");
            await().atMost(WAIT).until(() -> seen.contains("c"));
            assertThat(status(listener).state()).as("the stream goes on").isEqualTo(PartitionState.ACTIVE);
            if (row.command().equals("find")) {
              assertThat(seen).as("the request could not be read: no re-snapshot yet").containsOnlyOnce("a", "b");
            } else {
              await().atMost(WAIT).until(() -> seen.stream().filter("a"::equals).count() == 2);
              assertThat(asker.snapshotRequests("g")).as("done could not be recorded")
                  .noneMatch(r -> r.doneBy(PartitionSpec.single()));
            }
          }
          await().atMost(WAIT).until(() -> seen.stream().filter("a"::equals).count() >= 2
              && asker.snapshotRequests("g").stream().allMatch(r -> r.doneBy(PartitionSpec.single())));
          assertThat(status(listener).state()).isEqualTo(PartitionState.ACTIVE);
        }
      }
    }

    /**
     * A lease {@code delete}: the membership record a listener of a group of two deletes when it is
     * closed, so that its peer rebalances at once. When the delete fails, closing still ends, the
     * record is left to expire, and the peer takes every partition once it has.
     */
    private void leave(MongoDatabase data) {
      String peerApp = "peer-" + row.id() + "-" + tag;
      try (MongoClient feedClient = client(feedApp); MongoClient leaseClient = client(leaseApp);
          MongoClient peerLeaseClient = client(peerApp)) {
        insert(data, "a");
        insert(data, "b");
        Listener<BsonDocument> leaving = twoPartitions(feedClient, leaseClient, data.getName(), "leaving").build().start();
        try (Listener<BsonDocument> staying = twoPartitions(feedClient, peerLeaseClient, data.getName(), "staying").build()
            .start()) {
          // Both members count each other: each holds one partition.
          await().atMost(WAIT).until(() -> held(leaving) == 1 && held(staying) == 1);
          await().atMost(WAIT).until(() -> seen.containsAll(List.of("a", "b")));
          MongoLeaseStore leases = MongoLeaseStore.builder(MONGO.client().getDatabase(data.getName())).build();
          String members = "g/" + data.getName() + ".orders@member:";
          try (FailCommand.Armed armed = failure(data.getName()).enable(MONGO.client())) {
            leaving.close();
            armed.awaitFired(1, WAIT);
            assertThat(leases.list(members)).as("the leaving member's record is left to expire")
                .anySatisfy(r -> assertThat(r.name()).startsWith(members + "leaving/"));
          }
          insert(data, "c");
          insert(data, "d");
          await().atMost(WAIT).until(() -> held(staying) == 2 && seen.containsAll(List.of("c", "d")));
          assertThat(new ArrayList<>(new LinkedHashSet<>(seen))).as("every change, at least once")
              .containsExactlyInAnyOrder("a", "b", "c", "d");
        } finally {
          leaving.close();
        }
      }
    }

    private Listener.Builder<BsonDocument> twoPartitions(MongoClient feedClient, MongoClient leaseClient,
        String database, String owner) {
      return Listener.builder(MongoChangeFeed.builder(feedClient, database, "orders").build(),
              leases(leaseClient, database))
          .group("g")
          .owner(owner)
          .partitions(2)
          // The leaving member's record is left to expire: the peer's wait for it is this long.
          .leaseDuration(Duration.ofSeconds(4))
          .acquireInterval(Duration.ofMillis(100))
          .pollWait(Duration.ofMillis(50))
          .checkpoint(CheckpointPolicy.every(1, Duration.ofMillis(100)))
          .bootstrap(BootstrapPolicy.oldest())
          .handler((change, fence) -> seen.add(change.key()));
    }

    private static long held(Listener<?> l) {
      return l.status().stream().filter(s -> s.state() == PartitionState.ACTIVE).count();
    }

    /** {@code e}'s message and its causes'. */
    private static String messages(Throwable e) {
      StringBuilder b = new StringBuilder();
      for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
        b.append(t).append(" / ");
      }
      return b.toString();
    }

    private static PartitionStatus status(Listener<?> l) {
      return l.status().get(0);
    }

    private static void insert(MongoDatabase db, String id) {
      // A version, as a view's source documents carry one.
      db.getCollection("orders", BsonDocument.class).insertOne(new BsonDocument("_id", new BsonString(id))
          .append("version", new org.bson.BsonInt32(1)));
    }

    /** The listener's lease store, its calls bounded by {@link #FAULT_BOUND}. */
    private static MongoLeaseStore leases(MongoClient leaseClient, String database) {
      return MongoLeaseStore.builder(leaseClient.getDatabase(database)).operationTimeout(FAULT_BOUND).build();
    }

    private static MongoClient client(String app) {
      return client(app, null);
    }

    /** A client named {@code app}; its calls bounded by {@code timeout} (client-side), if not null. */
    private static MongoClient client(String app, Duration timeout) {
      MongoClientSettings.Builder settings = MongoClientSettings.builder()
          .applyConnectionString(new ConnectionString(MONGO.connectionString()))
          .applicationName(app)
          .applyToClusterSettings(b -> b.serverSelectionTimeout(5, TimeUnit.SECONDS))
          .applyToSocketSettings(b -> b.connectTimeout(2, TimeUnit.SECONDS).readTimeout(10, TimeUnit.SECONDS));
      if (timeout != null) {
        settings.timeout(timeout.toMillis(), TimeUnit.MILLISECONDS);
      }
      return MongoClients.create(settings.build());
    }
  }
}
