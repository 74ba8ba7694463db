package dev.sluice.testkit.mongo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoChangeStreamCursor;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Updates;
import com.mongodb.client.model.changestream.ChangeStreamDocument;
import com.mongodb.client.model.changestream.FullDocument;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The embedded server's change events, as corrected by {@link FaithfulOplog}, are shaped as a
 * real replica set's (what MongoDB documents for change events): each of these failed on the
 * stock oplog.
 */
class FaithfulOplogTest {
  private static EmbeddedMongo server;
  private static MongoClient client;

  @BeforeAll
  static void start() {
    server = EmbeddedMongo.start();
    client = server.client();
  }

  @AfterAll
  static void stop() {
    client.close();
    server.close();
  }

  private static MongoCollection<Document> collection() {
    return client.getDatabase("f" + UUID.randomUUID().toString().substring(0, 8)).getCollection("c");
  }

  private static List<ChangeStreamDocument<Document>> read(
      MongoCollection<Document> c, BsonDocument after, FullDocument mode, int count) {
    List<ChangeStreamDocument<Document>> out = new ArrayList<>();
    try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor =
        c.watch().resumeAfter(after).fullDocument(mode).batchSize(100).cursor()) {
      long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
      while (out.size() < count) {
        assertThat(System.nanoTime()).as("%d events within 10 s, got %s", count, out).isLessThan(deadline);
        ChangeStreamDocument<Document> next = cursor.tryNext();
        if (next != null) {
          out.add(next);
        }
      }
    }
    return out;
  }

  /** A resume token from before the test's writes: the first insert's own token, then its writes. */
  private static BsonDocument marker(MongoCollection<Document> c) {
    try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor = c.watch().batchSize(10).cursor()) {
      c.insertOne(new Document("_id", "marker"));
      ChangeStreamDocument<Document> first;
      do {
        first = cursor.tryNext();
      } while (first == null);
      return first.getResumeToken();
    }
  }

  @Test
  void anUpdateEventHasTheIdAsDocumentKeyAndDescribesTheUpdateWithTheChangesOwnValues() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    c.insertOne(new Document("_id", 1).append("lastEvent", "e0").append("n", 1).append("gone", true));
    c.updateOne(new Document("_id", 1), Updates.combine(Updates.set("lastEvent", "e1"), Updates.inc("n", 1),
        Updates.unset("gone")));
    c.updateOne(new Document("_id", 1), Updates.set("lastEvent", "e2"));

    List<ChangeStreamDocument<Document>> events = read(c, start, FullDocument.UPDATE_LOOKUP, 3);

    ChangeStreamDocument<Document> first = events.get(1);
    assertThat(first.getOperationTypeString()).isEqualTo("update");
    assertThat(first.getDocumentKey()).isEqualTo(new BsonDocument("_id", new BsonInt32(1)));
    assertThat(first.getUpdateDescription().getUpdatedFields())
        .isEqualTo(new BsonDocument("lastEvent", new BsonString("e1")).append("n", new BsonInt32(2)));
    assertThat(first.getUpdateDescription().getRemovedFields()).containsExactly("gone");
    // updateLookup: the document as it is when read, so already the later state
    assertThat(first.getFullDocument().getString("lastEvent")).isEqualTo("e2");
    assertThat(events.get(2).getUpdateDescription().getUpdatedFields())
        .isEqualTo(new BsonDocument("lastEvent", new BsonString("e2")));
  }

  @Test
  void aLookedUpDocumentThatWasDeletedIsNullAndPostImagesExistOnlyWhereTheCollectionKeepsThem() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    c.insertOne(new Document("_id", 2).append("v", 0));
    c.updateOne(new Document("_id", 2), Updates.set("v", 1)); // before images were enabled
    client.getDatabase(c.getNamespace().getDatabaseName()).runCommand(new Document("collMod", "c")
        .append("changeStreamPreAndPostImages", new Document("enabled", true)));
    c.updateOne(new Document("_id", 2), Updates.set("v", 2));
    c.deleteOne(new Document("_id", 2));

    assertThat(read(c, start, FullDocument.UPDATE_LOOKUP, 4).get(1).getFullDocument()).isNull();
    List<ChangeStreamDocument<Document>> images = read(c, start, FullDocument.WHEN_AVAILABLE, 4);
    assertThat(images.get(1).getFullDocument()).as("no image recorded for a write before collMod").isNull();
    assertThat(images.get(2).getFullDocument()).isEqualTo(new Document("_id", 2).append("v", 2));
    assertThat(images.get(3).getOperationTypeString()).isEqualTo("delete");
    assertThat(images.get(3).getDocumentKey()).isEqualTo(new BsonDocument("_id", new BsonInt32(2)));
    Document listed = client.getDatabase(c.getNamespace().getDatabaseName()).listCollections().first();
    assertThat(listed.get("options", Document.class).get("changeStreamPreAndPostImages", Document.class))
        .isEqualTo(new Document("enabled", true));
  }

  @Test
  void aReplacementIsAReplaceEventWithTheNewDocument() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    c.insertOne(new Document("_id", 3).append("v", 0));
    c.replaceOne(new Document("_id", 3), new Document("_id", 3).append("w", 1));

    ChangeStreamDocument<Document> replace = read(c, start, FullDocument.DEFAULT, 2).get(1);
    assertThat(replace.getOperationTypeString()).isEqualTo("replace");
    assertThat(replace.getFullDocument()).isEqualTo(new Document("_id", 3).append("w", 1));
    assertThat(replace.getDocumentKey()).isEqualTo(new BsonDocument("_id", new BsonInt32(3)));
  }

  @Test
  void aPushIsReportedWithTheArraysValueAfterThisUpdate() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    c.insertOne(new Document("_id", 4).append("events", List.of(new Document("id", "a"))));
    c.updateOne(new Document("_id", 4), Updates.push("events", new Document("id", "b")));
    c.updateOne(new Document("_id", 4), Updates.push("events", new Document("id", "c")));

    BsonDocument updated = read(c, start, FullDocument.DEFAULT, 3).get(1).getUpdateDescription().getUpdatedFields();
    assertThat(updated.getArray("events")).hasSize(2);
  }

  @Test
  void theOplogReadInNaturalOrderIsInTimestampOrderBothWays() {
    MongoCollection<Document> c = collection();
    for (int i = 0; i < 5; i++) {
      c.insertOne(new Document("_id", "n" + i));
    }
    MongoCollection<Document> oplog = client.getDatabase("local").getCollection("oplog.rs");
    List<Object> byTs = new ArrayList<>();
    oplog.find().sort(new Document("ts", 1)).forEach(d -> byTs.add(d.get("ts")));
    List<Object> forwards = new ArrayList<>();
    oplog.find().sort(new Document("$natural", 1)).forEach(d -> forwards.add(d.get("ts")));
    List<Object> backwards = new ArrayList<>();
    oplog.find().sort(new Document("$natural", -1)).forEach(d -> backwards.add(d.get("ts")));
    assertThat(forwards).hasSizeGreaterThanOrEqualTo(5).isEqualTo(byTs);
    List<Object> reversed = new ArrayList<>(byTs);
    java.util.Collections.reverse(reversed);
    assertThat(backwards).isEqualTo(reversed);
  }

  /**
   * A stream reads the oplog from its position in timestamp order, not in the order the collection
   * stores entries: after a trim, new entries take the slots the trimmed ones left at its front.
   * The oldest and newest entries (filtered, limited, projected) are read from either end.
   */
  @Test
  void aStreamReadsInTimestampOrderAfterATrimFreedSlotsForNewerEntries() {
    try (EmbeddedMongo own = EmbeddedMongo.start(); MongoClient ownClient = own.client()) {
      MongoCollection<Document> c = ownClient.getDatabase("trim").getCollection("c");
      for (int i = 0; i < 5; i++) {
        c.insertOne(new Document("_id", "a" + i));
      }
      MongoCollection<Document> oplog = ownClient.getDatabase("local").getCollection("oplog.rs");
      Document ofC = new Document("ns", "trim.c");
      List<BsonTimestamp> written = oplog.find(ofC).sort(new Document("$natural", 1))
          .map(d -> (BsonTimestamp) d.get("ts")).into(new ArrayList<>());
      assertThat(written).hasSize(5);
      assertThat(own.trimOplogBefore(written.get(3))).isGreaterThanOrEqualTo(3);
      for (int i = 0; i < 3; i++) {
        c.insertOne(new Document("_id", "b" + i));
      }

      List<Object> ids = new ArrayList<>();
      try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor =
          c.watch().startAtOperationTime(written.get(3)).batchSize(2).cursor()) {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
        while (ids.size() < 5) {
          assertThat(System.nanoTime()).as("5 events within 10 s, got %s", ids).isLessThan(deadline);
          ChangeStreamDocument<Document> next = cursor.tryNext();
          if (next != null) {
            ids.add(next.getDocumentKey().getString("_id").getValue());
          }
        }
      }
      assertThat(ids).containsExactly("a3", "a4", "b0", "b1", "b2");

      assertThat(oplog.find(ofC).sort(new Document("$natural", 1)).limit(1).projection(new Document("ts", 1)).first())
          .isEqualTo(new Document("ts", written.get(3)));
      assertThat(oplog.find(ofC).sort(new Document("$natural", -1)).limit(2)
              .map(d -> ((Document) d.get("o")).get("_id")).into(new ArrayList<>()))
          .containsExactly("b2", "b1");
    }
  }

  /** Tests edit the oplog through its collection (an entry changed, one deleted): streams read the edited oplog. */
  @Test
  void oplogEntriesEditedOrDeletedThroughTheCollectionAreWhatAStreamReads() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    for (int i = 1; i <= 3; i++) {
      c.insertOne(new Document("_id", "e" + i).append("v", i));
    }
    MongoCollection<Document> oplog = client.getDatabase("local").getCollection("oplog.rs");
    String ns = c.getNamespace().getFullName();
    assertThat(oplog.updateOne(new Document("ns", ns).append("o._id", "e1"), Updates.set("o.v", 10))
        .getModifiedCount()).isEqualTo(1);
    assertThat(oplog.deleteOne(new Document("ns", ns).append("o._id", "e2")).getDeletedCount()).isEqualTo(1);

    List<ChangeStreamDocument<Document>> events = read(c, start, FullDocument.DEFAULT, 2);
    assertThat(events).extracting(e -> e.getFullDocument().get("_id"), e -> e.getFullDocument().get("v"))
        .containsExactly(org.assertj.core.groups.Tuple.tuple("e1", 10), org.assertj.core.groups.Tuple.tuple("e3", 3));
  }

  @Test
  void aDropShowsInItsOwnStreamOnlyAndInvalidatesItWhichOnlyStartAfterGetsPast() {
    MongoCollection<Document> c = collection();
    MongoCollection<Document> other = client.getDatabase(c.getNamespace().getDatabaseName()).getCollection("other");
    BsonDocument start = marker(c);
    other.insertOne(new Document("_id", "x"));
    other.drop(); // another collection of the same database: not in c's stream
    c.insertOne(new Document("_id", "before"));
    c.drop();
    c.insertOne(new Document("_id", "after")); // the collection is created again

    List<ChangeStreamDocument<Document>> events = read(c, start, FullDocument.DEFAULT, 3);
    assertThat(events).extracting(ChangeStreamDocument::getOperationTypeString)
        .containsExactly("insert", "drop", "invalidate");
    try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor =
        c.watch().resumeAfter(start).batchSize(100).cursor()) {
      int seen = 0;
      while (seen < 3) {
        if (cursor.tryNext() != null) {
          seen++;
        }
      }
      assertThat(cursor.tryNext()).as("nothing after the invalidate on this cursor").isNull();
    }
    assertThat(read(c, events.get(1).getResumeToken(), FullDocument.DEFAULT, 1).get(0).getOperationTypeString())
        .as("resuming after the drop meets the invalidate again").isEqualTo("invalidate");
    BsonDocument invalidate = events.get(2).getResumeToken();
    assertThatThrownBy(() -> c.watch().resumeAfter(invalidate).cursor().tryNext())
        .isInstanceOfSatisfying(com.mongodb.MongoCommandException.class, e -> assertThat(e.getErrorCode()).isEqualTo(260));
    try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor =
        c.watch().startAfter(invalidate).batchSize(100).cursor()) {
      ChangeStreamDocument<Document> next;
      do {
        next = cursor.tryNext();
      } while (next == null);
      assertThat(next.getDocumentKey()).isEqualTo(new BsonDocument("_id", new BsonString("after")));
    }
  }

  /** The UUID {@code listCollections} reports for {@code c}, as a real server does in {@code info.uuid}. */
  private static UUID uuidListed(MongoCollection<Document> c) {
    BsonDocument listed = client.getDatabase(c.getNamespace().getDatabaseName()).listCollections(BsonDocument.class)
        .filter(new Document("name", c.getNamespace().getCollectionName())).first();
    assertThat(listed).as("%s is listed", c.getNamespace()).isNotNull();
    return listed.getDocument("info").getBinary("uuid").asUuid(); // subtype 4, as a real server sends it
  }

  @Test
  void aTokenCarriesTheCollectionsUuidAndTheDocumentKeyAsARealServersDoes() {
    MongoCollection<Document> c = collection();
    BsonDocument token = marker(c);
    UUID uuid = uuidListed(c);
    String hex = String.format("%016X%016X", uuid.getMostSignificantBits(), uuid.getLeastSignificantBits());
    // cluster time, version 1, event (128), txnOpIndex 0, not from an invalidate, the UUID, {_id: "marker"}
    assertThat(token.getString("_data").getValue())
        .matches("82[0-9A-F]{16}2B022C0100296E5A1004" + hex + "463C5F6964003C6D61726B6572000004");

    c.drop();
    c.insertOne(new Document("_id", "again"));
    assertThat(uuidListed(c)).as("a collection created again under the name is another collection").isNotEqualTo(uuid);
  }

  @Test
  void resumingAfterATokenOfAnotherCollectionFailsWith280WhenTheStreamPassesIt() {
    MongoCollection<Document> c = collection();
    MongoCollection<Document> other = client.getDatabase(c.getNamespace().getDatabaseName()).getCollection("other");
    BsonDocument ofOther = marker(other);
    c.insertOne(new Document("_id", "later"));

    assertThatThrownBy(() -> read(c, ofOther, FullDocument.DEFAULT, 1))
        .isInstanceOfSatisfying(com.mongodb.MongoCommandException.class, e -> {
          assertThat(e.getErrorCode()).isEqualTo(280);
          assertThat(e.getErrorMessage()).contains("cannot resume stream; the resume token was not found");
        });
    assertThat(read(other, ofOther, FullDocument.DEFAULT, 0)).as("its own stream resumes there").isEmpty();
  }

  @Test
  void anIdleBatchEndsWithAHighWaterMarkThatSortsBeforeEveryEventAtItsTime() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    client.getDatabase(c.getNamespace().getDatabaseName()).getCollection("elsewhere").insertOne(new Document("_id", 1));
    try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor =
        c.watch().resumeAfter(start).batchSize(10).cursor()) {
      assertThat(cursor.tryNext()).isNull();
      String mark = cursor.getResumeToken().getString("_data").getValue();
      // cluster time, version 1, high-water mark (0), txnOpIndex 0, not from an invalidate, nothing more
      assertThat(mark).matches("82[0-9A-F]{16}2B0229296E04");
      assertThat(mark).isGreaterThan(start.getString("_data").getValue());
      c.insertOne(new Document("_id", "next"));
      ChangeStreamDocument<Document> next;
      do {
        next = cursor.tryNext();
      } while (next == null);
      assertThat(next.getResumeToken().getString("_data").getValue()).isGreaterThan(mark);
      assertThat(read(c, cursor.getResumeToken(), FullDocument.DEFAULT, 0)).isEmpty();
    }
  }

  @Test
  void aTransactionIsOneApplyOpsEntryWhoseEventsShareOneClusterTimeAndDifferByTheirIndexAndAnAbortWritesNothing() {
    MongoCollection<Document> c = collection();
    BsonDocument start = marker(c);
    BsonDocument lsid;
    try (com.mongodb.client.ClientSession session = client.startSession()) {
      lsid = session.getServerSession().getIdentifier();
      session.withTransaction(() -> {
        c.insertMany(session, List.of(new Document("_id", "t1"), new Document("_id", "t2"), new Document("_id", "t3")));
        c.updateOne(session, new Document("_id", "t1"), Updates.set("v", 2));
        assertThat(c.countDocuments()).as("nothing is visible before the commit").isEqualTo(1);
        return null;
      });
      session.startTransaction();
      c.insertOne(session, new Document("_id", "aborted"));
      session.abortTransaction();
    }
    c.insertOne(new Document("_id", "after"));

    List<ChangeStreamDocument<Document>> events = read(c, start, FullDocument.DEFAULT, 5);
    assertThat(events).extracting(e -> e.getDocumentKey().getString("_id").getValue())
        .containsExactly("t1", "t2", "t3", "t1", "after");
    List<ChangeStreamDocument<Document>> txn = events.subList(0, 4);
    assertThat(txn).extracting(ChangeStreamDocument::getClusterTime).containsOnly(txn.get(0).getClusterTime());
    assertThat(txn).extracting(ChangeStreamDocument::getTxnNumber).doesNotContainNull().containsOnly(txn.get(0).getTxnNumber());
    assertThat(txn).extracting(ChangeStreamDocument::getLsid).containsOnly(lsid);
    assertThat(events.get(4).getClusterTime()).isGreaterThan(txn.get(0).getClusterTime());
    assertThat(events.get(4).getTxnNumber()).isNull();
    // txnOpIndex 0..3 after version 1 and the event type; the tokens sort in stream order
    for (int i = 0; i < 4; i++) {
      assertThat(txn.get(i).getResumeToken().getString("_data").getValue())
          .startsWith("82" + String.format("%08X%08X", txn.get(0).getClusterTime().getTime(), txn.get(0).getClusterTime().getInc())
              + "2B022C0100" + (i == 0 ? "29" : String.format("2B%02X", i << 1)) + "6E");
    }
    assertThat(events).extracting(e -> e.getResumeToken().getString("_data").getValue()).isSorted();
    assertThat(client.getDatabase("local").getCollection("oplog.rs")
        .countDocuments(new Document("op", "c").append("o.applyOps", new Document("$exists", true)))).isEqualTo(1);

    assertThat(read(c, txn.get(1).getResumeToken(), FullDocument.DEFAULT, 3))
        .as("resumed inside the transaction: its later changes, then what followed")
        .extracting(e -> e.getDocumentKey().getString("_id").getValue()).containsExactly("t3", "t1", "after");
  }
}
