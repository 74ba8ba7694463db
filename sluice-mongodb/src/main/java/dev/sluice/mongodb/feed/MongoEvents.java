package dev.sluice.mongodb.feed;

import dev.sluice.feed.Operation;
import java.time.Instant;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

/** Decoding helpers for raw change stream events. */
final class MongoEvents {

  private static final JsonWriterSettings CANONICAL =
      JsonWriterSettings.builder().outputMode(JsonMode.EXTENDED).build();

  private MongoEvents() {}

  static String keyOf(BsonValue id) {
    if (id == null) {
      throw new IllegalArgumentException("document _id must not be null");
    }
    switch (id.getBsonType()) {
      case STRING:
        return id.asString().getValue();
      case OBJECT_ID:
        return id.asObjectId().getValue().toHexString();
      case INT32:
        return Integer.toString(id.asInt32().getValue());
      case INT64:
        return Long.toString(id.asInt64().getValue());
      default:
        // Wrap in a document: the JSON writer needs one, and the wrapper keeps it unambiguous.
        return new BsonDocument("_id", id).toJson(CANONICAL);
    }
  }

  static Operation operationOf(String type) {
    switch (type) {
      case "insert":
        return Operation.INSERT;
      case "update":
        return Operation.UPDATE;
      case "replace":
        return Operation.REPLACE;
      case "delete":
        return Operation.DELETE;
      default:
        return Operation.OTHER;
    }
  }

  /**
   * The document's {@code _id}: from {@code documentKey}, else from {@code fullDocument}. Real
   * MongoDB always puts it in {@code documentKey}; the embedded server puts the update document
   * there for updates, and the fallback is correct on both.
   */
  static BsonValue documentId(BsonDocument event) {
    BsonValue key = event.get("documentKey");
    if (key != null && key.isDocument() && key.asDocument().containsKey("_id")) {
      return key.asDocument().get("_id");
    }
    BsonValue full = event.get("fullDocument");
    if (full != null && full.isDocument() && full.asDocument().containsKey("_id")) {
      return full.asDocument().get("_id");
    }
    return null;
  }

  /**
   * The cluster time a resume token stands for. A token's {@code _data} (MongoDB 4.0.7 and later)
   * is the hex of a KeyString whose first value is that time: type byte {@code 82} (timestamp),
   * then the timestamp's seconds and increment, 4 bytes each, big-endian. Empty for any other
   * form (a 3.6 BinData token, or a format this code does not know): callers keep the time they had.
   */
  static Optional<Instant> clusterTime(BsonDocument resumeToken) {
    return clusterTimestamp(resumeToken).map(ts -> Instant.ofEpochSecond(Integer.toUnsignedLong(ts.getTime())));
  }

  /** Like {@link #clusterTime}, the whole timestamp (seconds and increment). */
  static Optional<BsonTimestamp> clusterTimestamp(BsonDocument resumeToken) {
    BsonValue data = resumeToken.get("_data");
    if (data == null || !data.isString()) {
      return Optional.empty();
    }
    String hex = data.asString().getValue();
    if (hex.length() < 18 || !hex.regionMatches(true, 0, "82", 0, 2)) {
      return Optional.empty();
    }
    try {
      return Optional.of(new BsonTimestamp((int) Long.parseLong(hex.substring(2, 10), 16),
          (int) Long.parseLong(hex.substring(10, 18), 16)));
    } catch (NumberFormatException e) {
      return Optional.empty();
    }
  }

  /** The stable id of a change: the data of its resume token. */
  static String eventId(BsonDocument resumeToken) {
    BsonValue data = resumeToken.get("_data");
    if (data != null && data.isString()) {
      return data.asString().getValue();
    }
    return resumeToken.toJson(CANONICAL);
  }
}
