package dev.sluice.testkit.mongo;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.MongoCommandException;
import com.mongodb.client.MongoDatabase;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonTimestamp;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Reads at {@code readConcern: {level: "snapshot"}} answered as a real server answers them: the
 * reply names the read's cluster time, every batch shows that one point in time, and a read at a
 * given time the test kit cannot serve is refused, never answered with another time's state. The
 * commands are sent as the driver sends them in a snapshot session. The refusal is the test kit's
 * own (a real server reads its history), so that test runs on the embedded server only.
 */
class SnapshotReadsTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private static Document snapshot(BsonTimestamp at) {
    Document rc = new Document("level", "snapshot");
    if (at != null) {
      rc.append("atClusterTime", at);
    }
    return rc;
  }

  private static BsonTimestamp newestOplogEntry() {
    Document newest = MONGO.client().getDatabase("local").getCollection("oplog.rs")
        .find().sort(new Document("$natural", -1)).limit(1).first();
    return newest.get("ts", BsonTimestamp.class);
  }

  @Test
  void aSnapshotReadNamesItsTimeAndEveryBatchShowsThatTime() {
    MongoDatabase db = MONGO.freshDatabase();
    List<Document> docs = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      docs.add(new Document("_id", i).append("v", 1));
    }
    db.getCollection("items").insertMany(docs);
    BsonTimestamp newest = newestOplogEntry();

    Document reply = db.runCommand(new Document("find", "items").append("sort", new Document("_id", 1))
        .append("batchSize", 2).append("readConcern", snapshot(null)));
    Document cursor = reply.get("cursor", Document.class);
    assertThat(cursor.get("atClusterTime", BsonTimestamp.class)).as("the read's time: the newest write").isEqualTo(newest);
    assertThat(cursor.getList("firstBatch", Document.class)).hasSize(2);

    // A write after the read's time is not in its later batches.
    db.getCollection("items").updateOne(new Document("_id", 4), new Document("$set", new Document("v", 2)));
    List<Document> rest = new ArrayList<>();
    long id = cursor.getLong("id");
    while (id != 0) {
      Document more = db.runCommand(new Document("getMore", id).append("collection", "items")).get("cursor", Document.class);
      rest.addAll(more.getList("nextBatch", Document.class));
      id = more.getLong("id");
    }
    assertThat(rest).extracting(d -> d.getInteger("_id")).containsExactly(2, 3, 4);
    assertThat(rest).extracting(d -> d.getInteger("v")).as("the state at the read's time").containsOnly(1);
  }

  @Test
  void aReadAtAGivenTimeIsServedWhenTheCollectionDidNotChangeSinceAndRefusedWhenItDid() {
    MongoDatabase db = MONGO.freshDatabase();
    db.getCollection("items").insertOne(new Document("_id", 1).append("v", 1));
    BsonTimestamp then = newestOplogEntry();
    db.getCollection("others").insertOne(new Document("_id", 1)); // another collection: no matter

    Document reply = db.runCommand(new Document("find", "items").append("readConcern", snapshot(then)));
    assertThat(reply.get("cursor", Document.class).get("atClusterTime", BsonTimestamp.class)).isEqualTo(then);
    assertThat(reply.get("cursor", Document.class).getList("firstBatch", Document.class)).hasSize(1);

    if (!MONGO.embedded()) {
      return; // a real server reads the collection as it was then; the refusal is the test kit's
    }
    db.getCollection("items").updateOne(new Document("_id", 1), new Document("$set", new Document("v", 2)));
    assertThatThrownBy(() -> db.runCommand(new Document("find", "items").append("readConcern", snapshot(then))))
        .isInstanceOfSatisfying(MongoCommandException.class,
            e -> assertThat(e.getErrorMessage()).contains("cannot read").contains("keeps no history")
                .contains("239 SnapshotTooOld"));
  }

  @Test
  void theFailPointMakesASnapshotReadAnswerSnapshotTooOldAsARealServerDoes() {
    MongoDatabase db = MONGO.freshDatabase();
    db.getCollection("items").insertOne(new Document("_id", 1));
    try (FailCommand.Armed f = FailCommand.on("find").errorCode(239).times(1).enable(MONGO.client())) {
      assertThatThrownBy(() -> db.runCommand(new Document("find", "items").append("readConcern", snapshot(null))))
          .isInstanceOfSatisfying(MongoCommandException.class, e -> {
            assertThat(e.getErrorCode()).isEqualTo(239);
            assertThat(e.getErrorCodeName()).isEqualTo("SnapshotTooOld");
          });
    }
    assertThat(db.runCommand(new Document("find", "items").append("readConcern", snapshot(null)))
        .get("cursor", Document.class).getList("firstBatch", Document.class)).hasSize(1);
  }
}
