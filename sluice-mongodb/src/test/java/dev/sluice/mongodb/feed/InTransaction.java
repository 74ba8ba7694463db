package dev.sluice.mongodb.feed;

import com.mongodb.client.MongoDatabase;
import java.util.List;
import java.util.UUID;
import org.bson.BsonArray;
import org.bson.BsonBinary;
import org.bson.BsonBoolean;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonString;
import org.bson.BsonValue;

/** Write commands committed as one multi-document transaction, with the commands the driver sends for one. */
final class InTransaction {
  private InTransaction() {}

  static BsonDocument insert(String collection, BsonDocument... documents) {
    return new BsonDocument("insert", new BsonString(collection)).append("documents", new BsonArray(List.of(documents)));
  }

  static BsonDocument replace(String collection, BsonValue id, BsonDocument replacement) {
    return new BsonDocument("update", new BsonString(collection)).append("updates", new BsonArray(List.of(
        new BsonDocument("q", new BsonDocument("_id", id)).append("u", replacement))));
  }

  /** Runs {@code commands} in one transaction and commits it. */
  static void commit(MongoDatabase db, MongoDatabase admin, List<BsonDocument> commands) {
    BsonDocument lsid = new BsonDocument("id", new BsonBinary(UUID.randomUUID()));
    boolean first = true;
    for (BsonDocument command : commands) {
      db.runCommand(session(command.clone(), lsid, first));
      first = false;
    }
    admin.runCommand(session(new BsonDocument("commitTransaction", new BsonInt32(1)), lsid, false));
  }

  private static BsonDocument session(BsonDocument command, BsonDocument lsid, boolean first) {
    command.append("lsid", lsid).append("txnNumber", new BsonInt64(1)).append("autocommit", BsonBoolean.FALSE);
    if (first) {
      command.append("startTransaction", BsonBoolean.TRUE);
    }
    return command;
  }
}
