package dev.sluice.mongodb.feed;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.function.Function;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

/**
 * Where a partition's snapshot stands ({@code docs/adr/0066}): where its change stream stands
 * ({@code stream}, a {@link StreamStart}; absent before the first read, which says where it
 * starts), the {@code _id} of the last document handed out ({@code after}; absent before the
 * first) and what the snapshot reads ({@code scope}: a range and a request id for a re-snapshot on
 * request, {@code docs/adr/0067}). Its canonical extended JSON, {@code {"snapshot": {"stream":
 * {...}, "after": <_id>, "from": <_id>, "to": <_id>, "request": <request _id>}}} (only the fields that
 * apply), is the {@link Position#token()}.
 */
record SnapshotProgress(StreamStart stream, BsonValue after, SnapshotScope scope) {

  private static final JsonWriterSettings JSON =
      JsonWriterSettings.builder().outputMode(JsonMode.EXTENDED).build();
  private static final String PREFIX = "{\"snapshot\": {\"stream\": ";
  /** Before the first read: nothing read, no stream yet. */
  static final Position NOT_STARTED = new Position("{\"snapshot\": {}}", null);

  SnapshotProgress {
    if (stream == null && after != null) {
      throw new IllegalArgumentException("a snapshot with documents read has a stream position");
    }
    if (scope == null) {
      scope = SnapshotScope.ALL;
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
  static Function<BsonValue, Position> after(Position streamPosition, SnapshotScope scope) {
    String head = PREFIX + streamPosition.token() + ", \"after\": ";
    String tail = scope.positionFields() + "}}";
    Instant time = streamPosition.time();
    return id -> new Position(head + valueJson(id) + tail, time);
  }

  /** The position of the snapshot at {@code streamPosition}, before any document. */
  static Position atStart(Position streamPosition, SnapshotScope scope) {
    return new Position(PREFIX + streamPosition.token() + scope.positionFields() + "}}", streamPosition.time());
  }

  private static final JsonWriterSettings SHOWN = JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();

  /** One value as people read it (relaxed extended JSON: {@code 42}, {@code "abc"}, {@code {"$oid": ...}}). */
  static String shown(BsonValue value) {
    return json(value, SHOWN);
  }

  /** The extended JSON of one value. */
  static String valueJson(BsonValue value) {
    return json(value, JSON);
  }

  private static String json(BsonValue value, JsonWriterSettings settings) {
    String doc = new BsonDocument("v", value).toJson(settings);
    return doc.substring(doc.indexOf(':') + 1, doc.length() - 1).strip();
  }

  static SnapshotProgress fromPosition(Position position) {
    BsonDocument d = StreamStart.parse(position, e -> notOurs(position, e));
    BsonValue inner = d.get("snapshot");
    if (d.size() != 1 || inner == null || !inner.isDocument()) {
      throw notOurs(position, null);
    }
    BsonDocument s = inner.asDocument();
    if (s.isEmpty()) {
      return new SnapshotProgress(null, null, SnapshotScope.ALL);
    }
    if (!s.isDocument("stream") || !FIELDS.containsAll(s.keySet())) {
      throw notOurs(position, null);
    }
    StreamStart stream = StreamStart.fromPosition(new Position(s.getDocument("stream").toJson(JSON), position.time()));
    SnapshotScope scope = new SnapshotScope(s.get("from"), s.get("to"), s.get("request"));
    return new SnapshotProgress(stream, s.get("after"), scope);
  }

  private static final java.util.Set<String> FIELDS = java.util.Set.of("stream", "after", "from", "to", "request");

  private static FeedException notOurs(Position position, Exception cause) {
    return new FeedException("Checkpoint '" + position.token() + "' is not a MongoDB snapshot position (expected"
        + " {\"snapshot\": {\"stream\": {...}, \"after\": <_id>}}, with \"from\", \"to\" and \"request\" where they"
        + " apply); was it written by another feed?", cause, false);
  }
}
