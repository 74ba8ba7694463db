package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/**
 * The scalar form of {@link SequencedSet}: a last-writer-wins field where "last" means the highest
 * sequence number, not the latest arrival. Layout: {@code {_id, <field>: {seq: <long>, value:
 * <any>}}}, written by one conditional upsert guarded by {@code seq < newSeq}.
 *
 * <pre>{@code
 * SequencedValue email = SequencedValue.of(users, "email");
 * email.set(userId, new BsonString("b@x"), 7);
 * email.set(userId, new BsonString("a@x"), 5); // SUPERSEDED
 * email.get(userId);                           // b@x
 * }</pre>
 */
public interface SequencedValue {

  /**
   * {@link #of(MongoCollection, String)} on {@code database.collection}, refusing at once a
   * collection sharded on a key other than {@code _id} (its upserts by {@code _id} cannot be
   * routed, ADR 0060); the collection-handle form refuses such a target at its first write.
   */
  static SequencedValue of(com.mongodb.client.MongoDatabase database, String collection, String field) {
    return of(SequencedTargets.collection(database, collection), field);
  }

  /**
   * @param collection the collection holding the documents
   * @param field the top-level field holding the value; must not contain '.' or start with '$'
   */
  static SequencedValue of(MongoCollection<BsonDocument> collection, String field) {
    return new MongoSequencedValue(SequencedTargets.checked(collection, field), field);
  }

  /** Stores {@code value} (may be BsonNull) if {@code seq} is higher than the stored one. */
  Outcome set(BsonValue id, BsonValue value, long seq);

  /** The stored value, empty if the document or the field does not exist. */
  Optional<BsonValue> get(BsonValue id);

  /** The sequence number of the stored value, empty if none. */
  Optional<Long> sequence(BsonValue id);
}
