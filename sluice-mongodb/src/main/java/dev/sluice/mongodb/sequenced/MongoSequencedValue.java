package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import java.util.Objects;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonValue;

final class MongoSequencedValue extends SequencedField implements SequencedValue {
  private static final String VALUE = "value";

  MongoSequencedValue(MongoCollection<BsonDocument> collection, String field) {
    super(collection, field);
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
    return Optional.ofNullable(stored(id));
  }
}
