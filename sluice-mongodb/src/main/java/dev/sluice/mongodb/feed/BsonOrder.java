package dev.sluice.mongodb.feed;

import java.util.ArrayList;
import java.util.List;
import org.bson.BsonType;

/**
 * MongoDB's sort order of types, as far as the snapshot's chunked reads need it: values of
 * different types sort by type bracket (MinKey, null, numbers, strings, documents, arrays,
 * binary, ObjectId, booleans, dates, timestamps, regular expressions, MaxKey), and a comparison
 * such as {@code $gt} matches only within the bracket of its value.
 */
final class BsonOrder {
  private BsonOrder() {}

  /** The type bracket of a value, in sort order; 0 for types no {@code _id} can have. */
  static int bracket(BsonType type) {
    return switch (type) {
      case MIN_KEY -> 1;
      case NULL, UNDEFINED -> 2;
      case INT32, INT64, DOUBLE, DECIMAL128 -> 3;
      case STRING, SYMBOL -> 4;
      case DOCUMENT -> 5;
      case ARRAY -> 6;
      case BINARY -> 7;
      case OBJECT_ID -> 8;
      case BOOLEAN -> 9;
      case DATE_TIME -> 10;
      case TIMESTAMP -> 11;
      case REGULAR_EXPRESSION -> 12;
      case MAX_KEY -> 13;
      default -> 0;
    };
  }

  /**
   * The {@code $type} numbers of every bracket after {@code type}'s: with {@code {$gt: value}}
   * (which matches only within the value's own bracket) they select everything after the value.
   * Numbers, not aliases: they name the deprecated types (undefined, symbol) too.
   */
  static List<Integer> typesAfter(BsonType type) {
    return types(bracket(type) + 1, CODES.length);
  }

  /** The {@code $type} numbers of every bracket before {@code type}'s (for {@code $lte}). */
  static List<Integer> typesBefore(BsonType type) {
    return types(1, bracket(type) - 1);
  }

  /** {@code $type} numbers by bracket. */
  private static final int[][] CODES = {
    {-1}, {10, 6}, {16, 18, 1, 19}, {2, 14}, {3}, {4}, {5}, {7}, {8}, {9}, {17}, {11}, {127},
  };

  private static List<Integer> types(int firstBracket, int lastBracket) {
    List<Integer> out = new ArrayList<>();
    for (int b = firstBracket; b <= lastBracket; b++) {
      for (int code : CODES[b - 1]) {
        out.add(code);
      }
    }
    return out;
  }
}
