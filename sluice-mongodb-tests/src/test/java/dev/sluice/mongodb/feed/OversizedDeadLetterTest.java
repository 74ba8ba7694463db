package dev.sluice.mongodb.feed;

import static dev.sluice.mongodb.feed.FakeChangeStreamCursor.token;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoDatabase;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.bson.BsonArray;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 11 item 9: a change too large to be parked as one document. A real server splits an
 * event over 16 MB into fragments ({@code $changeStreamSplitLargeEvent}); reassembled, it is
 * larger than any document MongoDB stores, so parking it inline failed and the partition retried
 * parking forever while holding its lease. The split event comes from a driver-level FAKE cursor
 * (no available server produces it); the dead-letter and lease stores are the embedded MongoDB.
 */
class OversizedDeadLetterTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static final int NINE_MB = 9 * 1024 * 1024;

  private Listener<BsonDocument> listener;

  @AfterEach
  void close() {
    if (listener != null) {
      listener.close();
    }
  }

  @Test
  void aReassembledEventOver16MbIsParkedInPiecesReadBackWholeAndThePartitionGoesOn() {
    String big = "x".repeat(NINE_MB);
    BsonDocument first = new BsonDocument("_id", token(21))
        .append("splitEvent", new BsonDocument("fragment", new BsonInt32(1)).append("of", new BsonInt32(2)))
        .append("operationType", new BsonString("update"))
        .append("clusterTime", new BsonTimestamp(1_700_000_002, 1))
        .append("documentKey", new BsonDocument("_id", new BsonString("huge")))
        .append("fullDocument", new BsonDocument("_id", new BsonString("huge")).append("blob", new BsonString(big)));
    BsonDocument second = new BsonDocument("_id", token(22))
        .append("splitEvent", new BsonDocument("fragment", new BsonInt32(2)).append("of", new BsonInt32(2)))
        .append("updateDescription", new BsonDocument("updatedFields", new BsonDocument("blob", new BsonString(big)))
            .append("removedFields", new BsonArray()));
    FakeStreamSource source = new FakeStreamSource();
    source.willOpen(new FakeChangeStreamCursor()
        .event(FakeChangeStreamCursor.change(1, "insert", "a"))
        .event(first).event(second)
        .event(FakeChangeStreamCursor.change(3, "insert", "b")));
    MongoChangeFeedImpl feed =
        new MongoChangeFeedImpl(FakeStreamSource.settings("shop.orders", true), source);
    MongoDatabase db = MONGO.freshDatabase();
    MongoDeadLetterStore dlq = MongoDeadLetterStore.create(db, "deadletters");
    List<String> delivered = new CopyOnWriteArrayList<>();

    listener = Listener.builder(feed, MongoLeaseStore.builder(db).build())
        .group("g")
        // A scripted source opens once: a lease lost while 18 MB are written under load (the test
        // kit's one write lock) would re-open it. What is tested is parking, not leases.
        .leaseDuration(Duration.ofSeconds(30))
        .onFailure(FailurePolicy.park(RetryPolicy.attempts(2, Duration.ofMillis(10), Duration.ofMillis(20)), dlq))
        .handler((e, f) -> {
          if (e.key().equals("huge")) {
            throw new IllegalStateException("the handler cannot take this one");
          }
          delivered.add(e.key());
        })
        .build()
        .start();

    await().atMost(Duration.ofSeconds(30)).until(() -> delivered.contains("b"));
    assertThat(delivered).containsExactly("a", "b");
    assertThat(listener.status().get(0).state()).isEqualTo(PartitionState.ACTIVE);
    List<ParkedChange<BsonDocument>> parked = dlq.listKey("g/shop.orders", "huge");
    assertThat(parked).singleElement().satisfies(p -> {
      ChangeEvent<BsonDocument> e = p.event();
      assertThat(p.error()).contains("the handler cannot take this one");
      assertThat(e.document().getString("blob").getValue()).hasSize(NINE_MB);
      assertThat(e.changedFields().getString("blob").getValue()).hasSize(NINE_MB);
      assertThat(e.documentState()).isEqualTo(DocumentState.CURRENT);
    });
    assertThat(db.getCollection("deadletters_chunks").countDocuments()).as("stored in pieces").isGreaterThan(2);

    assertThat(dlq.remove("g/shop.orders", parked.get(0).event().id())).isTrue();
    assertThat(db.getCollection("deadletters_chunks").countDocuments()).as("pieces removed with it").isZero();
  }

  @Test
  void piecesWhoseEntryWasNeverWrittenAreRemovedOnceTheyAreAnHourOld() {
    // A crash between writing the pieces and the entry leaves pieces nothing refers to.
    MongoDatabase db = MONGO.freshDatabase();
    MongoDeadLetterStore dlq = MongoDeadLetterStore.create(db, "deadletters");
    var chunks = db.getCollection("deadletters_chunks", BsonDocument.class);
    org.bson.types.ObjectId old = new org.bson.types.ObjectId(java.util.Date.from(java.time.Instant.now().minus(Duration.ofHours(2))));
    org.bson.types.ObjectId recent = new org.bson.types.ObjectId();
    for (org.bson.types.ObjectId entry : List.of(old, recent)) {
      chunks.insertOne(new BsonDocument("_id", new BsonDocument("entry", new org.bson.BsonObjectId(entry))
          .append("n", new BsonInt32(0))).append("data", new org.bson.BsonBinary(new byte[16])));
    }
    ChangeEvent<BsonDocument> huge = new ChangeEvent<>("e-huge", "shop.orders", dev.sluice.feed.Position.of("p"),
        dev.sluice.feed.Operation.INSERT, "huge", new BsonDocument("_id", new BsonString("huge")),
        new BsonDocument("_id", new BsonString("huge")).append("blob", new BsonString("x".repeat(17 * 1024 * 1024))),
        null, null);
    dlq.park(new ParkedChange<>(huge, 0, "boom", 1, java.time.Instant.now(), 0, "g/shop.orders"));

    assertThat(chunks.countDocuments(new BsonDocument("_id.entry", new org.bson.BsonObjectId(old))))
        .as("an hour-old orphan is removed").isZero();
    assertThat(chunks.countDocuments(new BsonDocument("_id.entry", new org.bson.BsonObjectId(recent))))
        .as("a recent one may belong to a park in flight: kept").isEqualTo(1);
    assertThat(dlq.listKey("g/shop.orders", "huge")).singleElement()
        .satisfies(p -> assertThat(p.event().document().getString("blob").getValue()).hasSize(17 * 1024 * 1024));
  }
}
