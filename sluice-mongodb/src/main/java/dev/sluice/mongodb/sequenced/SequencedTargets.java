package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import dev.sluice.ConfigurationException;
import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.internal.ShardedTargets;
import org.bson.BsonDocument;

/** The checks {@link SequencedSet} and {@link SequencedValue} make of their target, written once. */
final class SequencedTargets {
  private SequencedTargets() {
  }

  /**
   * {@code database.collection}, refused at once when it is sharded on a key other than {@code _id}
   * (its upserts by {@code _id} cannot be routed, ADR 0060).
   */
  static MongoCollection<BsonDocument> collection(MongoDatabase database, String collection) {
    ConfigurationException.requireNonNull(database, "database");
    ConfigurationException.requireNonNull(collection, "collection");
    ShardedTargets.requireUpsertsById(database, collection);
    return database.getCollection(collection, BsonDocument.class);
  }

  /** {@code collection} read from its primary, once {@code field} is a top-level field name other than {@code _id}. */
  static MongoCollection<BsonDocument> checked(MongoCollection<BsonDocument> collection, String field) {
    ConfigurationException.requireNonNull(collection, "collection");
    ConfigurationException.requireNonNull(field, "field");
    ConfigurationException.require(
        !field.isEmpty() && !field.contains(".") && !field.startsWith("$") && !field.equals("_id"),
        "field",
        "'" + field + "'",
        "must be a non-empty top-level field name other than _id (no '.', no leading '$')");
    return MongoReads.primary(collection);
  }
}
