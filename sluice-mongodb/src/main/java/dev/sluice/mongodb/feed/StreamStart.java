package dev.sluice.mongodb.feed;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.Objects;
import java.util.function.Function;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.json.JsonMode;
import org.bson.json.JsonParseException;
import org.bson.json.JsonWriterSettings;

/**
 * Where a change stream (re)starts: after a resume token, after an {@code invalidate} event's token
 * ({@code startAfter}, the only way past one), or at an operation time (inclusive). Its canonical
 * extended JSON is the {@link Position#token()}: {@code {"resumeAfter": <token>}},
 * {@code {"startAfter": <token>}} or {@code {"startAtOperationTime": <timestamp>}}. An
 * operation-time position is what a cursor reports before its first change, so a bootstrap point
 * can be committed and resumed from.
 */
record StreamStart(BsonDocument resumeAfter, BsonDocument startAfter, BsonTimestamp startAtOperationTime) {

  private static final JsonWriterSettings JSON =
      JsonWriterSettings.builder().outputMode(JsonMode.EXTENDED).build();

  StreamStart {
    int set = (resumeAfter != null ? 1 : 0) + (startAfter != null ? 1 : 0) + (startAtOperationTime != null ? 1 : 0);
    if (set != 1) {
      throw new IllegalArgumentException("exactly one of resumeAfter, startAfter and startAtOperationTime");
    }
  }

  static StreamStart after(BsonDocument resumeToken) {
    return new StreamStart(Objects.requireNonNull(resumeToken, "resumeToken"), null, null);
  }

  /** After an invalidate event: {@code resumeAfter} its token is refused by the server. */
  static StreamStart afterInvalidate(BsonDocument invalidateToken) {
    return new StreamStart(null, Objects.requireNonNull(invalidateToken, "invalidateToken"), null);
  }

  static StreamStart at(BsonTimestamp operationTime) {
    return new StreamStart(null, null, Objects.requireNonNull(operationTime, "operationTime"));
  }

  /** Operation time of the first second that is not before {@code time}. */
  static BsonTimestamp timestampAtOrBefore(Instant time) {
    // Operation times count seconds; increments start at 1 within a second. Starting at the
    // second that contains `time` may repeat changes from before it, never skip one.
    return new BsonTimestamp((int) time.getEpochSecond(), 1);
  }

  Position toPosition(Instant time) {
    BsonDocument d =
        resumeAfter != null
            ? new BsonDocument("resumeAfter", resumeAfter)
            : startAfter != null
                ? new BsonDocument("startAfter", startAfter)
                : new BsonDocument("startAtOperationTime", startAtOperationTime);
    return new Position(d.toJson(JSON), time);
  }

  /** Parses a position this feed produced; a clear non-retryable error for anything else. */
  static StreamStart fromPosition(Position position) {
    BsonDocument d = parse(position, e -> notOurs(position, e));
    BsonValue token = d.get("resumeAfter");
    if (token != null && token.isDocument() && d.size() == 1) {
      return after(token.asDocument());
    }
    BsonValue invalidate = d.get("startAfter");
    if (invalidate != null && invalidate.isDocument() && d.size() == 1) {
      return afterInvalidate(invalidate.asDocument());
    }
    BsonValue ts = d.get("startAtOperationTime");
    if (ts != null && ts.isTimestamp() && d.size() == 1) {
      return at(ts.asTimestamp());
    }
    throw notOurs(position, null);
  }

  /** The document of a position's token; {@code notOurs} of the parse error when the token is no JSON document. */
  static BsonDocument parse(Position position, Function<Exception, FeedException> notOurs) {
    try {
      return BsonDocument.parse(position.token());
    } catch (JsonParseException | org.bson.BsonInvalidOperationException e) {
      throw notOurs.apply(e);
    }
  }

  /**
   * This position's place in the stream as a string whose natural order is the stream's order, or
   * null when it cannot be placed: the resume token's {@code _data} (the hex of a KeyString that
   * starts with the cluster time, MongoDB 4.2+, the form a server compares tokens by), upper case,
   * then U+0001; an operation time as the KeyString prefix of that time, then U+0000, so that it sorts
   * before every change at that time, as {@code startAtOperationTime} includes them. Tokens of
   * other forms (MongoDB 3.6 and 4.0 binary tokens, test servers) give null. Read straight from
   * the token's text: called for every change a shared reader reads.
   */
  static String sortKey(Position position) {
    String token = position.token();
    int at = token.indexOf("\"_data\": \"");
    if (at >= 0) {
      int from = at + 10;
      int to = token.indexOf('"', from);
      if (to < from + 18 || token.charAt(from) != '8' || token.charAt(from + 1) != '2') {
        return null;
      }
      StringBuilder key = new StringBuilder(to - from + 1);
      for (int i = from; i < to; i++) {
        char c = Character.toUpperCase(token.charAt(i));
        if ((c < '0' || c > '9') && (c < 'A' || c > 'F')) {
          return null;
        }
        key.append(c);
      }
      return key.append('\u0001').toString();
    }
    if (token.contains("startAtOperationTime")) {
      try {
        BsonTimestamp ts = fromPosition(position).startAtOperationTime();
        return ts == null ? null : String.format("82%016X", ts.getValue()) + '\u0000';
      } catch (FeedException e) {
        return null;
      }
    }
    return null;
  }

  private static FeedException notOurs(Position position, Exception cause) {
    return new FeedException(
        "Checkpoint '"
            + position.token()
            + "' is not a MongoDB change stream position (expected {\"resumeAfter\": <token>},"
            + " {\"startAfter\": <token>} or {\"startAtOperationTime\": <timestamp>}); was it written by"
            + " another feed?",
        cause,
        false);
  }

  @Override
  public String toString() {
    return resumeAfter != null
        ? "resumeAfter " + resumeAfter.toJson()
        : startAfter != null ? "startAfter " + startAfter.toJson() : "startAtOperationTime " + startAtOperationTime;
  }
}
