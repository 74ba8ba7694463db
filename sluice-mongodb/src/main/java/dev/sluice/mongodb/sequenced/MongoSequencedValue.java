package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Projections;
import java.util.Objects;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonValue;

final class MongoSequencedValue implements SequencedValue {
  private static final String VALUE = "value";
  private final MongoCollection<BsonDocument> collection;
  private final String field;

  MongoSequencedValue(MongoCollection<BsonDocument> collection, String field) {
    this.collection = collection;
    this.field = field;
  }

  @Override
  public Outcome set(BsonValue id, BsonValue value, long seq) {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(value, "value");
    return SequenceGuard.apply(collection, id, field, SequenceGuard.entry(seq).append(VALUE, value));
  }

  @Override
  public Optional<BsonValue> get(BsonValue id) {
    return entry(id).map(e -> e.get(VALUE));
  }

  @Override
  public Optional<Long> sequence(BsonValue id) {
    return entry(id).map(e -> e.getInt64(SequenceGuard.SEQ).getValue());
  }

  private Optional<BsonDocument> entry(BsonValue id) {
    BsonDocument doc =
        collection.find(Filters.eq("_id", id)).projection(Projections.include(field)).first();
    if (doc == null || !doc.isDocument(field)) {
      return Optional.empty();
    }
    return Optional.of(doc.getDocument(field));
  }
}
