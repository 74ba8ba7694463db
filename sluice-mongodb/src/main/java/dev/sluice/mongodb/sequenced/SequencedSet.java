package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import java.util.Set;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/**
 * A set-like field of a MongoDB document (a student's classes, say) changed by add and remove
 * operations stamped with sequence numbers, applied by any number of consumers at once, in any
 * arrival order, with duplicates, and without an application lock: the stored set always equals
 * the result of applying, for each member, the operation with the highest sequence number seen.
 * So once every operation has been applied at least once, the set equals applying all of them in
 * sequence order.
 *
 * <p>Layout (ADR 0030): {@code {_id, <field>: {<member>: {seq: <long>, present: <bool>}}}}. Each
 * operation is one conditional upsert of {@code <field>.<member>} guarded by {@code seq <
 * newSeq}. A removed member stays as a tombstone ({@code present: false}) so that a late add
 * with a lower sequence number cannot resurrect it; {@link #pruneTombstones(long)} bounds them.
 *
 * <pre>{@code
 * SequencedSet classes = SequencedSet.of(db.getCollection("students", BsonDocument.class), "classes");
 * classes.add(studentId, "CS 101", 1);
 * classes.add(studentId, "CS 101", 3);    // arrives before 2
 * classes.remove(studentId, "CS 101", 2); // SUPERSEDED: 3 is newer
 * classes.members(studentId);             // [CS 101]
 * }</pre>
 *
 * <p>Sequence numbers must be unique per (document, member) across distinct operations; the same
 * operation delivered twice carries the same number and is recognised as a duplicate.
 */
public interface SequencedSet {

  /**
   * {@link #of(MongoCollection, String)} on {@code database.collection}, refusing at once a
   * collection sharded on a key other than {@code _id} (its upserts by {@code _id} cannot be
   * routed, ADR 0060); the collection-handle form refuses such a target at its first write.
   */
  static SequencedSet of(com.mongodb.client.MongoDatabase database, String collection, String field) {
    return of(SequencedTargets.collection(database, collection), field);
  }

  /**
   * @param collection the collection holding the documents
   * @param field the top-level field holding the member map; must not contain '.' or start with '$'
   */
  static SequencedSet of(MongoCollection<BsonDocument> collection, String field) {
    return new MongoSequencedSet(SequencedTargets.checked(collection, field), field);
  }

  /** Records that {@code member} is in the set as of {@code seq}. */
  Outcome add(BsonValue id, String member, long seq);

  /** Records that {@code member} is not in the set as of {@code seq}. */
  Outcome remove(BsonValue id, String member, long seq);

  /** The members currently present (tombstones excluded), in natural order; empty if no document. */
  Set<String> members(BsonValue id);

  /**
   * Deletes, in document {@code id}, the tombstones whose sequence number is at or below {@code
   * horizon}. Safe only when no operation with a sequence number at or below {@code horizon} can
   * still arrive (for example: the oldest unacknowledged message in the queue is newer); a late
   * add at or below the horizon would otherwise be applied. Each tombstone is removed with a
   * conditional update, so a concurrent newer operation on the same member is never lost.
   *
   * @return how many tombstones were removed
   */
  long pruneTombstones(BsonValue id, long horizon);

  /** {@link #pruneTombstones(BsonValue, long)} for every document of the collection. */
  long pruneTombstones(long horizon);

}
