package dev.sluice.mongodb.reads;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.ReadPreference;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Fence;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.inbox.MongoInbox;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.mongodb.sequenced.SequencedSet;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.mongodb.view.ViewDefinition;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.Test;

/**
 * Issue 11 item 3: with the common {@code readPreference=secondaryPreferred} connection string,
 * every read Sluice makes to decide something still goes to the primary, at the read concern its
 * writes need. The embedded server answers as a mongos here, so the driver puts the read
 * preference into every command that is not primary ({@code $readPreference}), and the driver's
 * command listener sees each command as sent. A read of the test itself on the same client shows
 * the listener would catch a secondary read.
 */
class DecisionReadsGoToThePrimaryTest {
  private static final Set<String> READS = Set.of("find", "aggregate", "count", "distinct");

  /** Records every read command the client sends. */
  private static final class Reads implements CommandListener {
    final List<BsonDocument> sent = new CopyOnWriteArrayList<>();

    @Override
    public void commandStarted(CommandStartedEvent event) {
      if (READS.contains(event.getCommandName())) {
        sent.add(event.getCommand().clone());
      }
    }

    void clear() {
      sent.clear();
    }
  }

  private static boolean isChangeStream(BsonDocument command) {
    return command.containsKey("aggregate") && command.getArray("pipeline").stream()
        .anyMatch(s -> s.isDocument() && s.asDocument().containsKey("$changeStream"));
  }

  private static String mode(BsonDocument command) {
    return command.containsKey("$readPreference")
        ? command.getDocument("$readPreference").getString("mode").getValue() : "primary";
  }

  private static String readConcern(BsonDocument command) {
    return command.containsKey("readConcern") && command.getDocument("readConcern").containsKey("level")
        ? command.getDocument("readConcern").getString("level").getValue() : "default";
  }

  private static ChangeEvent<BsonDocument> change(String key) {
    return new ChangeEvent<>("e-" + key, "orders", Position.of("p-" + key), Operation.UPDATE, key,
        new BsonDocument("_id", new BsonString(key)), new BsonDocument("_id", new BsonString(key)), null, null);
  }

  @Test
  void everyReadThatDecidesGoesToThePrimaryUnderASecondaryPreferredClient() throws Exception {
    Reads reads = new Reads();
    try (EmbeddedMongo server = EmbeddedMongo.start().reportAsMongos(true).reportOperationTime(true);
        MongoClient client = MongoClients.create(server.clientSettings()
            .readPreference(ReadPreference.secondaryPreferred()).addCommandListener(reads).build())) {
      MongoDatabase db = client.getDatabase("shop");
      MongoCollection<BsonDocument> orders = db.getCollection("orders", BsonDocument.class);
      db.getCollection("customers", BsonDocument.class).insertOne(
          new BsonDocument("_id", new BsonString("c1")).append("name", new BsonString("Ada"))
              .append("version", new BsonInt32(1)));
      orders.insertOne(new BsonDocument("_id", new BsonString("o1")).append("customerId", new BsonString("c1"))
          .append("version", new BsonInt32(1)));

      reads.clear();
      assertThat(orders.find().first()).isNotNull();
      assertThat(reads.sent).as("control: an application read on this client goes to a secondary")
          .singleElement().satisfies(c -> assertThat(mode(c)).isEqualTo("secondaryPreferred"));
      reads.clear();

      // Parked keys: the new owner of a partition must see every park of the previous one.
      MongoDeadLetterStore dlq = MongoDeadLetterStore.create(db, "deadletters");
      dlq.park(new ParkedChange<>(change("k1"), 0, "boom", 1, Instant.now(), 1));
      assertThat(dlq.hasParked("orders", 0, "k1")).isTrue();
      assertThat(dlq.parkedKeys("orders", 0, 10)).containsExactly("k1");
      assertThat(dlq.listKey("orders", "k1")).hasSize(1);
      // Inbox claims.
      MongoInbox inbox = MongoInbox.create(db, "inbox");
      assertThat(inbox.processIfNew("m1", () -> { })).isTrue();
      assertThat(inbox.processIfNew("m1", () -> { })).isFalse();
      assertThat(inbox.processed("m1")).isTrue();
      // Leases and checkpoints.
      LeaseStore leases = MongoLeaseStore.builder(db).build();
      assertThat(leases.tryAcquire("orders#0of1", "n1", Duration.ofSeconds(5))).isPresent();
      assertThat(leases.read("orders#0of1")).isPresent();
      assertThat(leases.list("orders#")).hasSize(1);
      // View recomputation.
      MaterializedView view = MaterializedView.of(db, ViewDefinition.join("order_view")
          .root("orders", "customerId").lookup("customers", "customerId", "customer", "name").build());
      view.refresh("orders", new BsonString("o1"), new Fence("orders#0of1", "n1", 1));
      assertThat(view.target().withReadPreference(ReadPreference.primary()).find().first()).isNotNull();
      // Sequenced updates and fenced writes on the application's collections.
      SequencedSet classes = SequencedSet.of(db.getCollection("students", BsonDocument.class), "classes");
      classes.add(new BsonString("s1"), "cs101", 1);
      assertThat(classes.members(new BsonString("s1"))).containsExactly("cs101");
      FencedWrites.replaceOne(db.getCollection("targets", BsonDocument.class), new BsonString("t1"),
          new BsonDocument("v", new BsonInt32(1)), new Fence("orders#0of1", "n1", 1));
      // The feed's own reads (the change stream itself may read a secondary; it is excluded below).
      // The oplog bootstrap is not reached through mongos (refused there); its reads are pinned
      // with withReadPreference(primary) in DriverStreamSource.oplog().
      try (FeedCursor<BsonDocument> cursor = MongoChangeFeed.builder(client, "shop", "orders").build()
          .open(PartitionSpec.single(), StartPoint.latest())) {
        assertThat(cursor.position()).isNotNull();
      }

      List<BsonDocument> decisive = reads.sent.stream().filter(c -> !isChangeStream(c)).toList();
      assertThat(decisive).as("the reads above").hasSizeGreaterThan(10);
      assertThat(decisive).allSatisfy(c -> assertThat(mode(c)).as("%s", c.toJson()).isEqualTo("primary"));
      Set<String> sluiceOwn = Set.of("deadletters", "deadletters_epochs", "inbox", "order_view",
          "order_view_sluice_tickets", "sluice_leases", "customers", "orders");
      assertThat(decisive.stream().filter(c -> sluiceOwn.contains(c.getString(c.getFirstKey()).getValue())))
          .as("Sluice's own records and a view's sources are read majority-committed").isNotEmpty()
          .allSatisfy(c -> assertThat(readConcern(c)).as("%s", c.toJson()).isEqualTo("majority"));
    }
  }
}
