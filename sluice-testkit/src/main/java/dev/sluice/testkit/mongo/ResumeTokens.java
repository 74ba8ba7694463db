package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.ObjectId;
import de.bwaldvogel.mongo.exception.MongoServerError;
import java.nio.charset.StandardCharsets;
import java.util.Date;
import java.util.Map;
import java.util.UUID;

/**
 * Resume tokens in the form a MongoDB 4.2 to 6.0 replica set writes them (version 1): {@code _data}
 * is the upper-case hex of a KeyString of, in order, the cluster time, the token version (1), the
 * token type (128 for an event, 0 for a high-water mark, the post-batch token of a batch that
 * ended without an event of the stream), the event's index inside its transaction's
 * {@code applyOps} entry ({@code txnOpIndex}, 0 outside transactions), {@code fromInvalidate},
 * the collection's UUID and the document key. A server compares tokens by this KeyString, so the
 * hex order of two tokens is their order in the stream; a high-water mark sorts before every
 * event at its time.
 *
 * <p>Written from the format's description ({@code resume_token.cpp} and the KeyString type bytes
 * of the server). Limits: {@code _typeBits} (which a real server adds when a key holds a long or a
 * double) is left out, and a document key value of a type other than string, ObjectId, integral
 * number, boolean, null, date or document is encoded as its string form.
 */
final class ResumeTokens {
  static final int EVENT = 128;
  static final int HIGH_WATER_MARK = 0;
  private static final int VERSION = 1;

  private ResumeTokens() {}

  /** What a token says. {@code uuid} is null for a high-water mark. */
  record Data(String hex, BsonTimestamp clusterTime, int tokenType, int txnOpIndex, boolean fromInvalidate, UUID uuid) {
    boolean isHighWaterMark() {
      return tokenType == HIGH_WATER_MARK;
    }
  }

  static Document event(BsonTimestamp ts, int txnOpIndex, boolean fromInvalidate, UUID uuid, Document documentKey) {
    StringBuilder hex = new StringBuilder(128);
    timestamp(hex, ts);
    integer(hex, VERSION);
    integer(hex, EVENT);
    integer(hex, txnOpIndex);
    hex.append(fromInvalidate ? "6F" : "6E");
    uuid(hex, uuid);
    if (documentKey != null) {
      object(hex, documentKey);
    }
    hex.append("04");
    return new Document("_data", hex.toString());
  }

  static Document highWaterMark(BsonTimestamp ts) {
    StringBuilder hex = new StringBuilder(32);
    timestamp(hex, ts);
    integer(hex, VERSION);
    integer(hex, HIGH_WATER_MARK);
    integer(hex, 0);
    hex.append("6E04");
    return new Document("_data", hex.toString());
  }

  /** Parses a token as a server does; error 260 for one that is not a token of this form. */
  static Data parse(Document token) {
    Object value = token == null ? null : token.get("_data");
    if (!(value instanceof String data) || !data.matches("(?i)82[0-9A-F]{16}([0-9A-F]{2})*")) {
      throw invalid(token);
    }
    String hex = data.toUpperCase(java.util.Locale.ROOT);
    try {
      BsonTimestamp ts = new BsonTimestamp(Long.parseUnsignedLong(hex.substring(2, 18), 16));
      int[] at = {18};
      int version = readInteger(hex, at);
      if (version != VERSION) {
        throw invalid(token);
      }
      int type = readInteger(hex, at);
      int txnOpIndex = readInteger(hex, at);
      String flag = hex.substring(at[0], at[0] + 2);
      at[0] += 2;
      if (!flag.equals("6E") && !flag.equals("6F")) {
        throw invalid(token);
      }
      UUID uuid = null;
      if (hex.startsWith("5A1004", at[0])) {
        String u = hex.substring(at[0] + 6, at[0] + 38);
        uuid = new UUID(Long.parseUnsignedLong(u.substring(0, 16), 16), Long.parseUnsignedLong(u.substring(16), 16));
      }
      return new Data(hex, ts, type, txnOpIndex, flag.equals("6F"), uuid);
    } catch (IndexOutOfBoundsException | NumberFormatException e) {
      throw invalid(token);
    }
  }

  private static MongoServerError invalid(Document token) {
    return new MongoServerError(260, "InvalidResumeToken", "Unsupported resume token: " + token);
  }

  private static void timestamp(StringBuilder hex, BsonTimestamp ts) {
    hex.append(String.format("82%016X", ts.getValue()));
  }

  /** A non-negative integer: the type byte says how many bytes follow; the value is shifted left by one. */
  private static void integer(StringBuilder hex, long value) {
    if (value == 0) {
      hex.append("29");
      return;
    }
    long shifted = value << 1;
    int bytes = (64 - Long.numberOfLeadingZeros(shifted) + 7) / 8;
    hex.append(String.format("%02X", 0x2B + bytes - 1));
    for (int i = bytes - 1; i >= 0; i--) {
      hex.append(String.format("%02X", (shifted >>> (8 * i)) & 0xFF));
    }
  }

  private static int readInteger(String hex, int[] at) {
    int type = Integer.parseInt(hex.substring(at[0], at[0] + 2), 16);
    at[0] += 2;
    if (type == 0x29) {
      return 0;
    }
    int bytes = type - 0x2B + 1;
    if (bytes < 1 || bytes > 4) {
      throw new NumberFormatException("not a small positive integer: " + type);
    }
    long shifted = Long.parseLong(hex.substring(at[0], at[0] + 2 * bytes), 16);
    at[0] += 2 * bytes;
    return (int) (shifted >>> 1);
  }

  private static void uuid(StringBuilder hex, UUID uuid) {
    hex.append("5A1004").append(String.format("%016X%016X", uuid.getMostSignificantBits(), uuid.getLeastSignificantBits()));
  }

  private static void object(StringBuilder hex, Document d) {
    hex.append("46");
    for (Map.Entry<String, Object> field : d.entrySet()) {
      StringBuilder value = new StringBuilder();
      value(value, field.getValue());
      hex.append(value, 0, 2); // the value's type byte, then the name, then the value
      cString(hex, field.getKey());
      hex.append(value);
    }
    hex.append("00");
  }

  private static void value(StringBuilder hex, Object v) {
    if (v == null) {
      hex.append("14");
    } else if (v instanceof String s) {
      hex.append("3C");
      for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
        hex.append(b == 0 ? "00FF" : String.format("%02X", b & 0xFF));
      }
      hex.append("00");
    } else if (v instanceof ObjectId id) {
      hex.append("64");
      for (byte b : id.toByteArray()) {
        hex.append(String.format("%02X", b & 0xFF));
      }
    } else if (v instanceof Integer || v instanceof Long
        || v instanceof Double d && d == Math.rint(d) && Math.abs(d) < (1L << 52)) {
      long n = ((Number) v).longValue();
      if (n >= 0) {
        integer(hex, n);
      } else {
        long shifted = -n << 1;
        int bytes = (64 - Long.numberOfLeadingZeros(shifted) + 7) / 8;
        hex.append(String.format("%02X", 0x27 - (bytes - 1)));
        for (int i = bytes - 1; i >= 0; i--) {
          hex.append(String.format("%02X", ~(shifted >>> (8 * i)) & 0xFF));
        }
      }
    } else if (v instanceof Boolean b) {
      hex.append(b ? "6F" : "6E");
    } else if (v instanceof Date date) {
      hex.append("78").append(String.format("%016X", date.getTime() ^ Long.MIN_VALUE));
    } else if (v instanceof java.time.Instant instant) {
      hex.append("78").append(String.format("%016X", instant.toEpochMilli() ^ Long.MIN_VALUE));
    } else if (v instanceof Document d) {
      object(hex, d);
    } else {
      value(hex, String.valueOf(v));
    }
  }

  private static void cString(StringBuilder hex, String s) {
    for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
      hex.append(String.format("%02X", b & 0xFF));
    }
    hex.append("00");
  }
}
