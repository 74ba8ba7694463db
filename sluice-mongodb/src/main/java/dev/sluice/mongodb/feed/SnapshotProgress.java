package dev.sluice.mongodb.feed;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.function.Function;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.bson.json.JsonMode;
import org.bson.json.JsonParseException;
import org.bson.json.JsonWriterSettings;

/**
 * Where a partition's snapshot stands ({@code docs/adr/0066}): where its change stream stands
 * ({@code stream}, a {@link StreamStart}; absent before the first read, which says where it
 * starts) and the {@code _id} of the last document handed out ({@code after}; absent before the
 * first). Its canonical extended JSON, {@code {"snapshot": {"stream": {...}, "after": <_id>}}}, is
 * the {@link Position#token()}.
 */
record SnapshotProgress(StreamStart stream, BsonValue after) {

  private static final JsonWriterSettings JSON =
      JsonWriterSettings.builder().outputMode(JsonMode.EXTENDED).build();
  private static final String PREFIX = "{\"snapshot\": {\"stream\": ";
  /** Before the first read: nothing read, no stream yet. */
  static final Position NOT_STARTED = new Position("{\"snapshot\": {}}", null);

  SnapshotProgress {
    if (stream == null && after != null) {
      throw new IllegalArgumentException("a snapshot with documents read has a stream position");
    }
  }

  static boolean isSnapshot(Position position) {
    return position.token().startsWith("{\"snapshot\"");
  }

  /**
   * The position of the snapshot at stream position {@code streamPosition} (one of {@link
   * StreamStart#toPosition}) after each {@code _id}: the stream part is made once, the {@code _id}
   * spliced in, because every document read gets such a position.
   */
  static Function<BsonValue, Position> after(Position streamPosition) {
    String head = PREFIX + streamPosition.token() + ", \"after\": ";
    Instant time = streamPosition.time();
    return id -> new Position(head + valueJson(id) + "}}", time);
  }

  /** The position of the snapshot at {@code streamPosition}, before any document. */
  static Position atStart(Position streamPosition) {
    return new Position(PREFIX + streamPosition.token() + "}}", streamPosition.time());
  }

  /** The extended JSON of one value. */
  static String valueJson(BsonValue value) {
    String doc = new BsonDocument("v", value).toJson(JSON);
    return doc.substring(doc.indexOf(':') + 1, doc.length() - 1).strip();
  }

  static SnapshotProgress fromPosition(Position position) {
    BsonDocument d;
    try {
      d = BsonDocument.parse(position.token());
    } catch (JsonParseException | org.bson.BsonInvalidOperationException e) {
      throw notOurs(position, e);
    }
    BsonValue inner = d.get("snapshot");
    if (d.size() != 1 || inner == null || !inner.isDocument()) {
      throw notOurs(position, null);
    }
    BsonDocument s = inner.asDocument();
    if (s.isEmpty()) {
      return new SnapshotProgress(null, null);
    }
    if (!s.isDocument("stream") || s.size() > 2 || (s.size() == 2 && !s.containsKey("after"))) {
      throw notOurs(position, null);
    }
    StreamStart stream = StreamStart.fromPosition(new Position(s.getDocument("stream").toJson(JSON), position.time()));
    return new SnapshotProgress(stream, s.get("after"));
  }

  private static FeedException notOurs(Position position, Exception cause) {
    return new FeedException("Checkpoint '" + position.token() + "' is not a MongoDB snapshot position (expected"
        + " {\"snapshot\": {\"stream\": {...}, \"after\": <_id>}}); was it written by another feed?", cause, false);
  }
}
