package dev.sluice.testkit.mongo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.MongoCommandException;
import com.mongodb.MongoSocketException;
import com.mongodb.MongoWriteConcernException;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The test kit's {@code failCommand} fail point answers as a real server's: the same command
 * document, the same modes, the same effects on the driver. Runs against a real deployment too
 * ({@code -Dsluice.mongodb.uri}, a server started with {@code enableTestCommands=1}).
 */
class FailCommandTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private MongoCollection<Document> items;

  @AfterEach
  void off() {
    MONGO.client().getDatabase("admin").runCommand(new Document("configureFailPoint", "failCommand").append("mode", "off"));
  }

  private MongoCollection<Document> items() {
    if (items == null) {
      items = MONGO.freshDatabase().getCollection("items");
      items.insertOne(new Document("_id", 1));
    }
    return items;
  }

  @Test
  void timesFailsTheNextCommandsWithTheCodeAndLabelsGivenThenTurnsItselfOff() {
    MongoCollection<Document> c = items();
    try (FailCommand.Armed f = FailCommand.on("find").errorCode(136).errorLabels("Custom").times(2).enable(MONGO.client())) {
      for (int i = 0; i < 2; i++) {
        assertThatThrownBy(() -> c.find().first())
            .isInstanceOfSatisfying(MongoCommandException.class, e -> {
              assertThat(e.getErrorCode()).isEqualTo(136);
              assertThat(e.getErrorCodeName()).isEqualTo("CappedPositionLost");
              assertThat(e.getErrorLabels()).containsExactly("Custom");
            });
      }
      assertThat(c.find().first()).isEqualTo(new Document("_id", 1));
    }
  }

  @Test
  void skipLetsTheFirstCommandsThroughAndFailsEveryOneAfter() {
    MongoCollection<Document> c = items();
    try (FailCommand.Armed f = FailCommand.on("find").errorCode(2).skip(1).enable(MONGO.client())) {
      assertThat(c.find().first()).isNotNull();
      assertThatThrownBy(() -> c.find().first()).isInstanceOf(MongoCommandException.class);
      assertThatThrownBy(() -> c.find().first()).isInstanceOf(MongoCommandException.class);
    }
    assertThat(c.find().first()).isNotNull();
  }

  @Test
  void onlyTheNamedCommandsOfTheNamedApplicationFail() {
    MongoCollection<Document> c = items();
    try (MongoClient named = MongoClients.create(com.mongodb.MongoClientSettings.builder()
            .applyConnectionString(new com.mongodb.ConnectionString(MONGO.connectionString())).applicationName("victim").build());
        FailCommand.Armed f = FailCommand.on("find").errorCode(2).appName("victim").enable(MONGO.client())) {
      MongoCollection<Document> same = named.getDatabase(c.getNamespace().getDatabaseName()).getCollection("items");
      assertThatThrownBy(() -> same.find().first()).isInstanceOf(MongoCommandException.class);
      assertThat(c.find().first()).isNotNull();
      assertThat(same.countDocuments()).isEqualTo(1); // an aggregate: not named
    }
  }

  @Test
  void closeConnectionDropsTheConnectionUnansweredAndTheDriverRetriesAReadOnce() {
    MongoCollection<Document> c = items();
    try (FailCommand.Armed f = FailCommand.on("find").closeConnection().times(1).enable(MONGO.client())) {
      assertThat(c.find().first()).isNotNull(); // retryable reads: one retry on a new connection
      f.awaitFired(1, Duration.ofSeconds(5));
    }
    try (FailCommand.Armed f = FailCommand.on("find").closeConnection().times(2).enable(MONGO.client())) {
      assertThatThrownBy(() -> c.find().first()).isInstanceOf(MongoSocketException.class);
    }
    assertThat(c.find().first()).isNotNull();
  }

  @Test
  void aWriteConcernErrorComesWithAWriteThatWasApplied() {
    MongoCollection<Document> c = items();
    try (FailCommand.Armed f = FailCommand.on("insert").writeConcernError(64, "waiting for replication timed out")
        .times(1).enable(MONGO.client())) {
      assertThatThrownBy(() -> c.insertOne(new Document("_id", 2)))
          .isInstanceOfSatisfying(MongoWriteConcernException.class,
              e -> assertThat(e.getWriteConcernError().getCode()).isEqualTo(64));
    }
    assertThat(c.countDocuments(new Document("_id", 2))).isEqualTo(1);
  }

  @Test
  void aBlockedCommandHoldsOnlyItsOwnConnectionAndRunsAfterTheBlock() throws Exception {
    MongoCollection<Document> c = items();
    try (MongoClient slow = MongoClients.create(com.mongodb.MongoClientSettings.builder()
            .applyConnectionString(new com.mongodb.ConnectionString(MONGO.connectionString())).applicationName("slow").build());
        FailCommand.Armed f = FailCommand.on("find").block(Duration.ofSeconds(3)).appName("slow").times(1)
            .enable(MONGO.client())) {
      MongoCollection<Document> same = slow.getDatabase(c.getNamespace().getDatabaseName()).getCollection("items");
      CompletableFuture<Document> blocked = CompletableFuture.supplyAsync(() -> same.find().first());
      f.awaitFired(1, Duration.ofSeconds(10));
      // While it is held, every other connection is served.
      for (int i = 0; i < 20; i++) {
        assertThat(c.find().first()).isNotNull();
      }
      assertThat(blocked).isNotDone();
      assertThat(blocked.get(20, TimeUnit.SECONDS)).isEqualTo(new Document("_id", 1));
    }
  }

  @Test
  void configureFailPointAnswersHowOftenItWasEntered() {
    MongoCollection<Document> c = items();
    Document admin = new Document("configureFailPoint", "failCommand").append("mode", "alwaysOn")
        .append("data", new Document("failCommands", java.util.List.of("find")).append("errorCode", 2));
    MONGO.client().getDatabase("admin").runCommand(admin);
    assertThatThrownBy(() -> c.find().first()).isInstanceOf(MongoCommandException.class);
    Document off = MONGO.client().getDatabase("admin")
        .runCommand(new Document("configureFailPoint", "failCommand").append("mode", "off"));
    assertThat(off.get("count", Number.class).longValue()).isGreaterThanOrEqualTo(1);
  }
}
