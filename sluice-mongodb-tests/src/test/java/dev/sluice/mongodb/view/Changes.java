package dev.sluice.mongodb.view;

import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import java.util.concurrent.atomic.AtomicLong;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/**
 * Change events as a MongoDB feed would deliver them for writes the test just made: the full
 * document as it is now (UPDATE_LOOKUP semantics), or none for a delete.
 */
final class Changes {
  private static final AtomicLong SEQ = new AtomicLong();

  private Changes() {}

  static ChangeEvent<BsonDocument> of(MongoDatabase db, String collection, Operation op, BsonValue id) {
    BsonDocument doc =
        op == Operation.DELETE
            ? null
            : db.getCollection(collection, BsonDocument.class).find(Filters.eq("_id", id)).first();
    long n = SEQ.incrementAndGet();
    return new ChangeEvent<>(
        "c" + n,
        collection,
        Position.of("p" + n),
        op,
        id.toString(),
        new BsonDocument("_id", id),
        doc,
        null,
        null);
  }
}
