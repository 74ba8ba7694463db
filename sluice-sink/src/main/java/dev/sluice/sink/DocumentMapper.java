package dev.sluice.sink;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.ConfigurationException;

/**
 * Turns a backend's document (the {@code D} of {@link dev.sluice.feed.ChangeEvent}) into JSON
 * for the envelope.
 *
 * @param <D> the backend's document type
 */
@FunctionalInterface
public interface DocumentMapper<D> {

  /** The JSON form of {@code document}; never called with {@code null}. */
  JsonNode toJson(D document) throws Exception;

  /**
   * Writes {@code document} as one JSON value to {@code out} (never called with {@code null}),
   * without building a tree where the mapper can (the BSON mapper writes the driver's relaxed
   * extended JSON as it is). Default: {@link #toJson}, then the tree.
   */
  default void writeJson(D document, JsonGenerator out) throws Exception {
    out.writeTree(toJson(document));
  }

  /**
   * For MongoDB documents ({@code org.bson.BsonDocument}): relaxed extended JSON, so numbers and
   * strings stay plain and ObjectIds, dates and decimals keep their type as {@code {"$oid": ..}},
   * {@code {"$date": ..}}, {@code {"$numberDecimal": ..}}. Needs {@code org.mongodb:bson}.
   */
  static <B extends org.bson.BsonDocument> DocumentMapper<B> bson() {
    return BsonDocumentMapper.instance();
  }

  /** Any type Jackson can convert ({@code Map}, POJOs, {@code JsonNode}). */
  static <D> DocumentMapper<D> jackson(ObjectMapper mapper) {
    ConfigurationException.requireNonNull(mapper, "mapper");
    return mapper::valueToTree;
  }
}
