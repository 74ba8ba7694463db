package dev.sluice.mongodb.sequenced;

import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.UpdateOptions;
import dev.sluice.mongodb.internal.ShardedTargets;
import com.mongodb.client.model.Updates;
import dev.sluice.mongodb.internal.MongoErrors;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.BsonValue;

/**
 * The one primitive both sequenced forms use: store {@code entry} (which carries {@code seq}) at
 * {@code path} of document {@code id} only if what is stored there has a lower sequence number or
 * nothing. A single conditional upsert, so it needs no lock and no transaction (ADR 0030).
 */
final class SequenceGuard {
  static final String SEQ = "seq";

  private SequenceGuard() {}

  static Outcome apply(
      MongoCollection<BsonDocument> collection, BsonValue id, String path, BsonDocument entry) {
    long seq = entry.getInt64(SEQ).getValue();
    var filter =
        Filters.and(
            Filters.eq("_id", id),
            Filters.or(
                Filters.exists(path + "." + SEQ, false), Filters.lt(path + "." + SEQ, seq)));
    var update = Updates.set(path, entry);
    // First E11000: the document did not match because it exists with a newer seq, or because a
    // concurrent upsert created it between our filter and our insert. The retry tells them apart:
    // the document exists now, so a second E11000 can only mean "stored seq >= ours".
    for (int attempt = 0; attempt < 2; attempt++) {
      try {
        ShardedTargets.upsert(collection, () -> collection.updateOne(filter, update, new UpdateOptions().upsert(true)));
        return Outcome.APPLIED;
      } catch (MongoWriteException e) {
        if (!MongoErrors.isDuplicateKey(e)) {
          throw e;
        }
      }
    }
    return Outcome.SUPERSEDED;
  }

  static BsonDocument entry(long seq) {
    return new BsonDocument(SEQ, new BsonInt64(seq));
  }
}
