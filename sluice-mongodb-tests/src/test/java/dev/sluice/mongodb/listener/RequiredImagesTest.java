package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 32 section 3 items 2 and 9: {@code required} pre- and post-images through a listener.
 * A change whose required image the server does not have (here: written before images were
 * enabled; the test kit answers 47 NoMatchingDocument for it as a real server does, and lets images
 * expire, FaithfulOplogTest) stops the partition naming {@code expireAfterSeconds} by default, or
 * is parked with its reason under {@code onMissingImage(PARK)} while the stream goes on. And a
 * required image of a collection that records none fails the partition at once, with the {@code
 * collMod} that enables images in its status (it stayed ACQUIRING with no error, logging a stack
 * trace every few seconds).
 */
class RequiredImagesTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private final String db = "images" + DATABASES.incrementAndGet();
  private final List<Listener<?>> listeners = new ArrayList<>();
  private final List<ChangeEvent<BsonDocument>> seen = new CopyOnWriteArrayList<>();
  private final List<MongoClient> clients = new ArrayList<>();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
    clients.forEach(MongoClient::close);
  }

  private MongoDatabase database() {
    return MONGO.client().getDatabase(db);
  }

  private Listener<BsonDocument> start(MongoChangeFeed feed, FailurePolicy failure) {
    Listener<BsonDocument> l = Listener.builder(feed, MongoLeaseStore.builder(database()).build())
        .group("g")
        .leaseDuration(Duration.ofSeconds(3))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(10, Duration.ofMillis(100)))
        .onFailure(failure)
        .handler((change, fence) -> seen.add(change))
        .build();
    listeners.add(l);
    return l.start();
  }

  private static PartitionStatus status(Listener<?> l) {
    return l.status().get(0);
  }

  private MongoChangeFeed.Builder feed() {
    return MongoChangeFeed.builder(MONGO.client(), db, "orders")
        .fullDocumentBeforeChange(FullDocumentBeforeChange.REQUIRED);
  }

  /** "a" updated before images were enabled (its pre-image never recorded), "b" after. */
  private void writeAChangeWithoutItsPreImage() {
    var orders = database().getCollection("orders");
    orders.insertOne(new Document("_id", "a").append("v", 1));
    orders.updateOne(Filters.eq("_id", "a"), Updates.set("v", 2));
    orders.insertOne(new Document("_id", "b").append("v", 1));
    database().runCommand(new Document("collMod", "orders")
        .append("changeStreamPreAndPostImages", new Document("enabled", true)));
    orders.updateOne(Filters.eq("_id", "b"), Updates.set("v", 2));
    orders.updateOne(Filters.eq("_id", "a"), Updates.set("v", 3));
    orders.insertOne(new Document("_id", "c"));
  }

  @Test
  void byDefaultAChangeWithoutItsRequiredImageStopsThePartitionNamingExpireAfterSecondsAndTheRemedy() {
    writeAChangeWithoutItsPreImage();
    Listener<BsonDocument> l = start(feed().build(), FailurePolicy.block(RetryPolicy.defaults()));

    await().atMost(Duration.ofSeconds(30)).until(() -> status(l).state() == PartitionState.FAILED);
    assertThat(status(l).error())
        .contains("has no pre-image (fullDocumentBeforeChange required)")
        .contains("error 47 NoMatchingDocument")
        .contains("changeStreamOptions.preAndPostImages.expireAfterSeconds")
        .contains("Nothing was skipped")
        .contains("onMissingImage(PARK)")
        .doesNotContain("delete the group's checkpoint");
    // A failed read returns nothing of its batch (a real server's getMore does the same): a's
    // insert, read with the update, comes again when the partition is restarted.
    assertThat(seen).isEmpty();
  }

  @Test
  void underParkTheChangeIsParkedWithItsReasonItsKeyFollowsAndTheStreamGoesOn() {
    writeAChangeWithoutItsPreImage();
    MongoDeadLetterStore dlq = MongoDeadLetterStore.create(database(), "deadletters");
    List<String> modes = new CopyOnWriteArrayList<>(); // each stream opened, with its pre-image mode
    MongoClient watched = MongoClients.create(MONGO.server().clientSettings().addCommandListener(new CommandListener() {
      @Override
      public void commandStarted(CommandStartedEvent event) {
        BsonDocument cmd = event.getCommand();
        if (event.getCommandName().equals("aggregate") && cmd.isArray("pipeline") && !cmd.getArray("pipeline").isEmpty()
            && cmd.getArray("pipeline").get(0).asDocument().get("$changeStream") instanceof BsonDocument stage) {
          modes.add(stage.getString("fullDocumentBeforeChange", new BsonString("off")).getValue());
        }
      }
    }).build());
    clients.add(watched);
    Listener<BsonDocument> l = start(MongoChangeFeed.builder(watched, db, "orders")
            .fullDocumentBeforeChange(FullDocumentBeforeChange.REQUIRED)
            .onMissingImage(MongoChangeFeed.OnMissingImage.PARK).build(),
        FailurePolicy.park(RetryPolicy.attempts(1, Duration.ofMillis(1), Duration.ofMillis(1)), dlq));

    await().atMost(Duration.ofSeconds(30)).until(() -> seen.stream().anyMatch(e -> e.key().equals("c")));
    assertThat(seen).extracting(ChangeEvent::key).containsExactly("a", "b", "b", "c");
    assertThat(seen.get(2).before()).as("b's update, read with its required pre-image")
        .isEqualTo(BsonDocument.parse("{_id: 'b', v: 1}"));
    List<ParkedChange<BsonDocument>> parked = dlq.listKey("g/" + db + ".orders", "a");
    assertThat(parked).hasSize(2);
    assertThat(parked.get(0).error()).contains("pre-image missing (expired or never recorded)")
        .contains("expireAfterSeconds");
    assertThat(parked.get(1).error()).as("a's later change follows it, in order").contains("parked behind");
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
    assertThat(status(l).error()).contains("parked change").contains("pre-image missing");
    assertThat(modes).as("read on with whenAvailable to find the change, then required again after it")
        .containsExactly("required", "whenAvailable", "required");
  }

  @Test
  void aRequiredImageOfACollectionThatRecordsNoneFailsThePartitionNamingTheCollMod() {
    database().getCollection("orders").insertOne(new Document("_id", "x"));
    Listener<BsonDocument> l = start(MongoChangeFeed.builder(MONGO.client(), db, "orders")
        .fullDocument(FullDocument.REQUIRED).build(), FailurePolicy.block(RetryPolicy.defaults()));

    await().atMost(Duration.ofSeconds(30)).until(() -> status(l).state() == PartitionState.FAILED);
    assertThat(status(l).error())
        .contains(db + ".orders does not keep images")
        .contains("db.runCommand({collMod: \"orders\", changeStreamPreAndPostImages: {enabled: true}})");
    assertThat(status(l).errorAt()).isNotNull();
  }
}
