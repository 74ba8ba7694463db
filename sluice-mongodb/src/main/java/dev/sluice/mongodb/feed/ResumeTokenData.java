package dev.sluice.mongodb.feed;

import java.util.Locale;
import java.util.Optional;
import java.util.UUID;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;

/**
 * What a MongoDB 4.2+ resume token says about itself. Its {@code _data} is the hex of a KeyString
 * of, in order: the cluster time; the token version (0, 1 or 2); from version 1 the token type
 * (128 an event, 0 a high-water mark: the post-batch token of a batch that ended without an event
 * of the stream); the event's index in its transaction's {@code applyOps} entry
 * ({@code txnOpIndex}); from version 1 {@code fromInvalidate}; then the collection's UUID (absent
 * in high-water marks, explicitly null from version 2 where there is none) and the event's
 * identifier. Only what Sluice reads is decoded.
 *
 * @param uuid the collection the event is of, or null when the token names none
 */
record ResumeTokenData(BsonTimestamp clusterTime, int version, boolean highWaterMark, int txnOpIndex,
    boolean fromInvalidate, UUID uuid) {

  /** Empty for a token of another form (3.6 and 4.0 binary tokens) or one this code cannot read. */
  static Optional<ResumeTokenData> of(BsonDocument token) {
    BsonValue data = token == null ? null : token.get("_data");
    if (data == null || !data.isString()) {
      return Optional.empty();
    }
    String hex = data.asString().getValue().toUpperCase(Locale.ROOT);
    if (hex.length() < 18 || !hex.startsWith("82")) {
      return Optional.empty();
    }
    try {
      BsonTimestamp time = new BsonTimestamp(Long.parseUnsignedLong(hex.substring(2, 18), 16));
      int[] at = {18};
      int version = integer(hex, at);
      boolean highWaterMark = false;
      if (version >= 1) {
        highWaterMark = integer(hex, at) == 0;
      }
      int txnOpIndex = integer(hex, at);
      boolean fromInvalidate = false;
      if (version >= 1) {
        String flag = hex.substring(at[0], at[0] + 2);
        at[0] += 2;
        if (!flag.equals("6E") && !flag.equals("6F")) {
          return Optional.empty();
        }
        fromInvalidate = flag.equals("6F");
      }
      UUID uuid = null;
      // A UUID is BinData (type 90) of 16 bytes, subtype 4.
      if (hex.startsWith("5A1004", at[0]) && hex.length() >= at[0] + 38) {
        String u = hex.substring(at[0] + 6, at[0] + 38);
        uuid = new UUID(Long.parseUnsignedLong(u.substring(0, 16), 16), Long.parseUnsignedLong(u.substring(16), 16));
      }
      return Optional.of(new ResumeTokenData(time, version, highWaterMark, txnOpIndex, fromInvalidate, uuid));
    } catch (IndexOutOfBoundsException | NumberFormatException e) {
      return Optional.empty();
    }
  }

  /** A non-negative KeyString integer: zero (41), or 1 to 8 bytes (43 to 50) of the value shifted left once. */
  private static int integer(String hex, int[] at) {
    int type = Integer.parseInt(hex.substring(at[0], at[0] + 2), 16);
    at[0] += 2;
    if (type == 41) {
      return 0;
    }
    int bytes = type - 43 + 1;
    if (bytes < 1 || bytes > 4) {
      throw new NumberFormatException("not a small non-negative integer: type " + type);
    }
    long shifted = Long.parseLong(hex.substring(at[0], at[0] + 2 * bytes), 16);
    at[0] += 2 * bytes;
    return (int) (shifted >>> 1);
  }
}
