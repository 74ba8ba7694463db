package dev.sluice.mongodb.sequenced;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Projections;
import org.bson.BsonDocument;
import org.bson.BsonValue;

/** What both sequenced forms hold: the collection, and the top-level field of each document they guard. */
abstract class SequencedField {
  final MongoCollection<BsonDocument> collection;
  final String field;

  SequencedField(MongoCollection<BsonDocument> collection, String field) {
    this.collection = collection;
    this.field = field;
  }

  /** Document {@code id} with only the field; null if there is no such document. */
  BsonDocument read(BsonValue id) {
    return collection.find(Filters.eq("_id", id)).projection(Projections.include(field)).first();
  }

  /** The field of document {@code id}; null if there is no such document or it holds no such field. */
  BsonDocument stored(BsonValue id) {
    BsonDocument doc = read(id);
    return doc == null || !doc.isDocument(field) ? null : doc.getDocument(field);
  }
}
