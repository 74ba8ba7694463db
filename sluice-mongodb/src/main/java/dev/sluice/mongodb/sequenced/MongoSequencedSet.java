package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.Updates;
import java.util.Collections;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;
import org.bson.BsonBoolean;
import org.bson.BsonDocument;
import org.bson.BsonValue;

final class MongoSequencedSet extends SequencedField implements SequencedSet {
  static final String PRESENT = "present";

  MongoSequencedSet(MongoCollection<BsonDocument> collection, String field) {
    super(collection, field);
  }

  @Override
  public Outcome add(BsonValue id, String member, long seq) {
    return write(id, member, seq, true);
  }

  @Override
  public Outcome remove(BsonValue id, String member, long seq) {
    return write(id, member, seq, false);
  }

  private Outcome write(BsonValue id, String member, long seq, boolean present) {
    Objects.requireNonNull(id, "id");
    String path = field + "." + FieldNames.encode(member);
    return SequenceGuard.apply(
        collection, id, path, SequenceGuard.entry(seq).append(PRESENT, BsonBoolean.valueOf(present)));
  }

  @Override
  public Set<String> members(BsonValue id) {
    Objects.requireNonNull(id, "id");
    BsonDocument members = stored(id);
    Set<String> present = new TreeSet<>();
    if (members != null) {
      for (Map.Entry<String, BsonValue> e : members.entrySet()) {
        if (e.getValue().isDocument() && e.getValue().asDocument().getBoolean(PRESENT).getValue()) {
          present.add(FieldNames.decode(e.getKey()));
        }
      }
    }
    return Collections.unmodifiableSet(present);
  }

  @Override
  public long pruneTombstones(BsonValue id, long horizon) {
    Objects.requireNonNull(id, "id");
    BsonDocument doc = read(id);
    return doc == null ? 0 : prune(doc, horizon);
  }

  @Override
  public long pruneTombstones(long horizon) {
    long pruned = 0;
    // Only documents holding at least one tombstone would be worth reading, but a member map has
    // no fixed paths to index; a full scan in the background is the documented cost.
    for (BsonDocument doc : collection.find().projection(Projections.include(field))) {
      pruned += prune(doc, horizon);
    }
    return pruned;
  }

  /** Prunes the tombstones of {@code doc} as read; package-private for the race test. */
  long prune(BsonDocument doc, long horizon) {
    if (!doc.isDocument(field)) {
      return 0;
    }
    long pruned = 0;
    for (Map.Entry<String, BsonValue> e : doc.getDocument(field).entrySet()) {
      BsonDocument entry = e.getValue().asDocument();
      long seq = entry.getInt64(SequenceGuard.SEQ).getValue();
      if (!entry.getBoolean(PRESENT).getValue() && seq <= horizon) {
        String path = field + "." + e.getKey();
        // Conditional on the tombstone we read: an operation applied since then stays.
        var result =
            collection.updateOne(
                Filters.and(
                    Filters.eq("_id", doc.get("_id")),
                    Filters.eq(path + "." + SequenceGuard.SEQ, seq),
                    Filters.eq(path + "." + PRESENT, false)),
                Updates.unset(path));
        pruned += result.getModifiedCount();
      }
    }
    return pruned;
  }
}
