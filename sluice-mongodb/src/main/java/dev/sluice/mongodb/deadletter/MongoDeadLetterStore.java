package dev.sluice.mongodb.deadletter;

import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;
import org.bson.BsonDocument;

/**
 * A {@link DeadLetterStore} in a MongoDB collection. One document per parked change:
 *
 * <pre>{@code
 * {_id: ObjectId, stream, eventId, key, partition, seq, error, attempts, parkedAt,
 *  event: {id, stream, position: {token, time}, operation, key, documentKey, document, time, raw}}
 * }</pre>
 *
 * <p>{@code seq} comes from an atomic counter (collection {@code <name>_seq}), so entries keep
 * the order they were parked in even when two processes park in the same millisecond; a unique
 * index on {@code (stream, eventId)} makes {@link #park} idempotent. {@code raw} is kept when the
 * feed's raw event is a {@code BsonDocument}, and dropped otherwise.
 */
public interface MongoDeadLetterStore extends DeadLetterStore<BsonDocument> {

  /** Opens (and indexes) the store in {@code database.collection}. */
  static MongoDeadLetterStore create(MongoDatabase database, String collection) {
    ConfigurationException.requireNonNull(database, "database");
    ConfigurationException.requireNonNull(collection, "collection");
    ConfigurationException.require(!collection.isBlank(), "collection", "'" + collection + "'", "must not be blank");
    return new MongoDeadLetterStoreImpl(database, collection);
  }

  /** How many changes of {@code stream} are parked. */
  long count(String stream);
}
