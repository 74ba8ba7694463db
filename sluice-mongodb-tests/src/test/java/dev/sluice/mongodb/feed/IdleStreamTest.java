package dev.sluice.mongodb.feed;

import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.change;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.event.CommandListener;
import com.mongodb.event.CommandStartedEvent;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/**
 * Issue 11 item 10, idle streams: a real server holds an idle getMore for {@code maxAwaitTimeMS}
 * and answers as soon as a change arrives, so the feed asks it to wait ({@code serverAwait},
 * default 1 s) and does not add a client back-off after a getMore the server held. Before, every
 * getMore asked for 10 ms and the client then slept up to 200 ms: five empty reads per second per
 * idle partition and up to 200 ms added to the delivery of the next change.
 */
class IdleStreamTest {

  /** A FAKE server that holds the idle getMore, since the embedded one answers at once. */
  @Test
  void aGetMoreTheServerHeldIsFollowedByTheNextAtOnceNotByABackOff() {
    FakeStreamSource source = new FakeStreamSource();
    // Back-offs far longer than the test's bound: only a client that backs off after a held
    // getMore can miss it.
    CursorSettings settings = new CursorSettings("d.c", 100, Duration.ofSeconds(30), Duration.ofSeconds(30),
        Duration.ofMillis(100), false, FullDocument.UPDATE_LOOKUP,
        com.mongodb.client.model.changestream.FullDocumentBeforeChange.OFF, MongoChangeFeed.OnInvalidate.STOP,
        MongoChangeFeed.OnMissingImage.STOP, MongoChangeFeed.DEFAULT_SNAPSHOT_CHUNK_SIZE, true);
    source.willOpen(new FakeChangeStreamCursor().heldEmpty(Duration.ofMillis(100)).event(change(1, "insert", "a")));
    FeedCursor<BsonDocument> cursor = new MongoChangeFeedImpl(settings, source).open(PartitionSpec.single(), StartPoint.oldest());

    List<ChangeEvent<BsonDocument>> read = assertTimeoutPreemptively(Duration.ofSeconds(10),
        () -> cursor.poll(Duration.ofSeconds(20)), "the cursor slept after a getMore the server had held");
    assertThat(read).extracting(ChangeEvent::key).containsExactly("a");
  }

  @Test
  void everyGetMoreAsksTheServerToWaitTheServerAwait() {
    List<BsonDocument> getMores = new CopyOnWriteArrayList<>();
    CommandListener listener = new CommandListener() {
      @Override
      public void commandStarted(CommandStartedEvent event) {
        if (event.getCommandName().equals("getMore")) {
          getMores.add(event.getCommand().clone());
        }
      }
    };
    try (EmbeddedMongo server = EmbeddedMongo.start();
        MongoClient client = MongoClients.create(server.clientSettings().addCommandListener(listener).build())) {
      client.getDatabase("shop").getCollection("orders").insertOne(new Document("_id", "o1"));
      MongoChangeFeed feed = MongoChangeFeed.builder(client, "shop", "orders").build();
      MongoChangeFeed custom = MongoChangeFeed.builder(client, "shop", "orders").serverAwait(Duration.ofMillis(2500)).build();
      try (FeedCursor<BsonDocument> c = feed.open(PartitionSpec.single(), StartPoint.latest());
          FeedCursor<BsonDocument> d = custom.open(PartitionSpec.single(), StartPoint.latest())) {
        c.poll(Duration.ofMillis(300));
        d.poll(Duration.ofMillis(300));
      }
    }
    assertThat(getMores).isNotEmpty();
    assertThat(getMores).extracting(g -> g.getNumber("maxTimeMS").longValue())
        .as("maxAwaitTimeMS of the idle getMores")
        .contains(MongoChangeFeed.DEFAULT_SERVER_AWAIT_MILLIS, 2500L)
        .allMatch(t -> t == MongoChangeFeed.DEFAULT_SERVER_AWAIT_MILLIS || t == 2500L);
  }
}
