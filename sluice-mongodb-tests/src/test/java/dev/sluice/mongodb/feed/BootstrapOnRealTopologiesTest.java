package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.Test;

/**
 * How the feed finds its bootstrap point on the deployments users run (issue 11 item 6): the
 * oplog read in natural order (a sort by ts has no index and scans the whole oplog), a sharded
 * cluster refused for {@code oldest} with a message saying what to do instead, and {@code hello}
 * with the {@code isMaster} fallback for servers without it. Commands are checked with the
 * driver's command listener, as sent.
 */
class BootstrapOnRealTopologiesTest {

  /** Records every command the client sends. */
  private static final class Commands implements CommandListener {
    final List<BsonDocument> sent = new CopyOnWriteArrayList<>();

    @Override
    public void commandStarted(CommandStartedEvent event) {
      sent.add(event.getCommand().clone());
    }

    List<BsonDocument> named(String name) {
      return sent.stream().filter(c -> c.containsKey(name)).toList();
    }
  }

  private static MongoClient client(EmbeddedMongo server, Commands commands) {
    return MongoClients.create(server.clientSettings().addCommandListener(commands).build());
  }

  @Test
  void theOldestBootstrapReadsTheOplogInNaturalOrderNotSortedByTs() {
    Commands commands = new Commands();
    try (EmbeddedMongo server = EmbeddedMongo.start(); MongoClient client = client(server, commands)) {
      client.getDatabase("shop").getCollection("orders", BsonDocument.class)
          .insertOne(new BsonDocument("_id", new BsonString("a")));
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.oldest())) {
        List<ChangeEvent<BsonDocument>> first = new CopyOnWriteArrayList<>();
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(10))
            .until(() -> first.addAll(cursor.poll(java.time.Duration.ofMillis(50))) && !first.isEmpty());
        assertThat(first.get(0).key()).isEqualTo("a");
      }
      List<BsonDocument> oplogReads = commands.named("find").stream()
          .filter(c -> c.getString("find").getValue().equals("oplog.rs")).toList();
      assertThat(oplogReads).isNotEmpty().allSatisfy(c ->
          assertThat(c.getDocument("sort")).isEqualTo(new BsonDocument("$natural", new BsonInt32(1))));
    }
  }

  @Test
  void throughMongosTheOldestBootstrapIsRefusedSayingWhatToDoInstead() {
    Commands commands = new Commands();
    try (EmbeddedMongo server = EmbeddedMongo.start().reportAsMongos(true);
        MongoClient client = client(server, commands)) {
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.oldest()))
          .hasMessageContaining("shop.orders")
          .hasMessageContaining("mongos")
          .hasMessageContaining("StartPoint.at");
      assertThat(commands.named("find")).as("no oplog read through mongos").isEmpty();
    }
  }

  @Test
  void aServerWithoutHelloIsAskedIsMasterOnceItRefusedHello() {
    Commands commands = new Commands();
    try (EmbeddedMongo server = EmbeddedMongo.start().answerHello(false); MongoClient client = client(server, commands)) {
      client.getDatabase("shop").getCollection("orders", BsonDocument.class)
          .insertOne(new BsonDocument("_id", new BsonString("a"))); // latest then reads its ts, not the clock
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      for (int i = 0; i < 3; i++) {
        try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.latest())) {
          assertThat(cursor.position()).isNotNull();
        }
      }
      assertThat(commands.named("hello")).as("probed once per database handle").hasSize(1);
      assertThat(commands.named("isMaster")).hasSize(3);
    }
  }

  @Test
  void aServerWithHelloIsNeverAskedIsMaster() {
    Commands commands = new Commands();
    try (EmbeddedMongo server = EmbeddedMongo.start(); MongoClient client = client(server, commands)) {
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.latest())) {
        assertThat(cursor.position()).isNotNull();
      }
      assertThat(commands.named("hello")).isNotEmpty();
      assertThat(commands.named("isMaster")).as("isMaster is refused under the Stable API in strict mode").isEmpty();
    }
  }

  /** A server clock an hour ahead of the cluster's operation time: a mongos whose clock runs ahead. */
  private static EmbeddedMongo clockAhead() {
    return EmbeddedMongo.start(java.time.Clock.offset(java.time.Clock.systemUTC(), java.time.Duration.ofHours(1)));
  }

  @Test
  void latestThroughMongosStartsAtTheClustersOperationTimeNotTheRoutersClock() {
    // Issue 11 item 5. The embedded server stamps its oplog with its own clock, so here the
    // operation time runs ahead with it; what matters is that the start is the reported operation
    // time, so a write right after the open is delivered.
    Commands commands = new Commands();
    try (EmbeddedMongo server = clockAhead().reportAsMongos(true).reportOperationTime(true);
        MongoClient client = client(server, commands)) {
      var orders = client.getDatabase("shop").getCollection("orders", BsonDocument.class);
      orders.insertOne(new BsonDocument("_id", new BsonString("before")));
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      try (FeedCursor<BsonDocument> cursor = feed.open(PartitionSpec.single(), StartPoint.latest())) {
        orders.insertOne(new BsonDocument("_id", new BsonString("after")));
        List<ChangeEvent<BsonDocument>> seen = new CopyOnWriteArrayList<>();
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(10))
            .until(() -> seen.addAll(cursor.poll(java.time.Duration.ofMillis(50))) && !seen.isEmpty());
        assertThat(seen).extracting(ChangeEvent::key).containsExactly("after");
      }
    }
  }

  @Test
  void latestThroughAMongosThatReportsNoOperationTimeIsRefusedNotStartedAtItsWallClock() {
    // Before: the router's wall-clock second, an hour ahead here: every change of that hour skipped.
    Commands commands = new Commands();
    try (EmbeddedMongo server = EmbeddedMongo.start(java.time.Clock.offset(java.time.Clock.systemUTC(),
            java.time.Duration.ofHours(1))).reportAsMongos(true);
        MongoClient client = client(server, commands)) {
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
          .isInstanceOf(dev.sluice.feed.FeedException.class)
          .hasMessageContaining("shop.orders")
          .hasMessageContaining("reported no operation time")
          .hasMessageContaining("wall clock");
    }
  }
}
