package dev.sluice.mongodb.feed;

import com.mongodb.client.ClientSession;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import java.util.List;
import org.bson.BsonArray;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.bson.BsonValue;

/** Write commands committed as one multi-document transaction through the driver's session API. */
final class InTransaction {
  private InTransaction() {}

  static BsonDocument insert(String collection, BsonDocument... documents) {
    return new BsonDocument("insert", new BsonString(collection)).append("documents", new BsonArray(List.of(documents)));
  }

  static BsonDocument replace(String collection, BsonValue id, BsonDocument replacement) {
    return new BsonDocument("update", new BsonString(collection)).append("updates", new BsonArray(List.of(
        new BsonDocument("q", new BsonDocument("_id", id)).append("u", replacement))));
  }

  /**
   * Runs {@code commands} in one transaction of a session and commits it, as an application does
   * ({@code ClientSession.withTransaction}): the driver adds {@code startTransaction},
   * {@code autocommit}, {@code txnNumber} and {@code lsid}, then sends {@code commitTransaction}.
   */
  static void commit(MongoClient client, MongoDatabase db, List<BsonDocument> commands) {
    try (ClientSession session = client.startSession()) {
      session.withTransaction(() -> {
        for (BsonDocument command : commands) {
          db.runCommand(session, command);
        }
        return null;
      });
    }
  }
}
