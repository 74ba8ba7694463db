package dev.sluice.sink;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.bson.BsonDocument;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

/** Kept in its own class so that the bson jar is needed only by applications that use it. */
final class BsonDocumentMapper<B extends BsonDocument> implements DocumentMapper<B> {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final JsonWriterSettings RELAXED =
      JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();
  private static final BsonDocumentMapper<BsonDocument> INSTANCE = new BsonDocumentMapper<>();

  private BsonDocumentMapper() {}

  @SuppressWarnings("unchecked")
  public static <B extends BsonDocument> DocumentMapper<B> instance() {
    return (DocumentMapper<B>) INSTANCE;
  }

  @Override
  public JsonNode toJson(B document) throws Exception {
    return JSON.readTree(document.toJson(RELAXED));
  }

  /** The driver's relaxed extended JSON, as it is: no tree, no second parse. */
  @Override
  public void writeJson(B document, JsonGenerator out) throws Exception {
    out.writeRawValue(document.toJson(RELAXED));
  }
}
