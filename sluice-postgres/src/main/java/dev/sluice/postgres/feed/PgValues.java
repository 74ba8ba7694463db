package dev.sluice.postgres.feed;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.temporal.ChronoField;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Column values in PostgreSQL's text output format, as pgoutput sends them, converted to Java:
 *
 * <table>
 *   <caption>Type mapping</caption>
 *   <tr><th>PostgreSQL</th><th>Java</th></tr>
 *   <tr><td>boolean</td><td>Boolean</td></tr>
 *   <tr><td>smallint, integer</td><td>Integer</td></tr>
 *   <tr><td>bigint, oid</td><td>Long</td></tr>
 *   <tr><td>real, double precision</td><td>Double (NaN and infinities included)</td></tr>
 *   <tr><td>numeric</td><td>BigDecimal, without loss ('NaN' and infinities stay text)</td></tr>
 *   <tr><td>text, varchar, char, name</td><td>String</td></tr>
 *   <tr><td>uuid</td><td>UUID</td></tr>
 *   <tr><td>json, jsonb</td><td>Jackson JsonNode</td></tr>
 *   <tr><td>timestamp with time zone</td><td>OffsetDateTime</td></tr>
 *   <tr><td>timestamp</td><td>LocalDateTime</td></tr>
 *   <tr><td>date</td><td>LocalDate</td></tr>
 *   <tr><td>time</td><td>LocalTime</td></tr>
 *   <tr><td>bytea</td><td>byte[]</td></tr>
 *   <tr><td>one-dimensional arrays of the above</td><td>List of the element type (nulls kept)</td></tr>
 *   <tr><td>anything else (interval, money, inet, ranges, geometric, enums, composite, domains,
 *       infinite dates and timestamps, multi-dimensional arrays)</td><td>String, the server's text
 *       form</td></tr>
 * </table>
 */
final class PgValues {
  /** json/jsonb numbers are arbitrary precision on the server: read them as BigDecimal, exactly. */
  private static final ObjectMapper JSON = new ObjectMapper()
      .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .setNodeFactory(com.fasterxml.jackson.databind.node.JsonNodeFactory.withExactBigDecimals(true));
  /** PostgreSQL's text form of timestamps: {@code 2026-11-25 11:49:09.123456+01}, zone optional. */
  private static final DateTimeFormatter TIMESTAMP = new DateTimeFormatterBuilder()
      .appendPattern("yyyy-MM-dd HH:mm:ss")
      .optionalStart().appendFraction(ChronoField.NANO_OF_SECOND, 0, 9, true).optionalEnd()
      .optionalStart().appendOffset("+HH:mm", "Z").optionalEnd()
      .optionalStart().appendOffset("+HH", "Z").optionalEnd()
      .toFormatter();

  static final int BOOL = 16;
  static final int BYTEA = 17;
  static final int NAME = 19;
  static final int INT8 = 20;
  static final int INT2 = 21;
  static final int INT4 = 23;
  static final int TEXT = 25;
  static final int OID = 26;
  static final int JSON_TYPE = 114;
  static final int FLOAT4 = 700;
  static final int FLOAT8 = 701;
  static final int BPCHAR = 1042;
  static final int VARCHAR = 1043;
  static final int DATE = 1082;
  static final int TIME = 1083;
  static final int TIMESTAMP_TYPE = 1114;
  static final int TIMESTAMPTZ = 1184;
  static final int NUMERIC = 1700;
  static final int UUID_TYPE = 2950;
  static final int JSONB = 3802;

  /** Array type OID to element type OID, for the element types above. */
  private static final Map<Integer, Integer> ARRAYS = Map.ofEntries(
      Map.entry(1000, BOOL), Map.entry(1001, BYTEA), Map.entry(1003, NAME), Map.entry(1016, INT8),
      Map.entry(1005, INT2), Map.entry(1007, INT4), Map.entry(1009, TEXT), Map.entry(1028, OID),
      Map.entry(199, JSON_TYPE), Map.entry(1021, FLOAT4), Map.entry(1022, FLOAT8), Map.entry(1014, BPCHAR),
      Map.entry(1015, VARCHAR), Map.entry(1182, DATE), Map.entry(1183, TIME), Map.entry(1115, TIMESTAMP_TYPE),
      Map.entry(1185, TIMESTAMPTZ), Map.entry(1231, NUMERIC), Map.entry(2951, UUID_TYPE), Map.entry(3807, JSONB));

  private PgValues() {}

  /** The Java value of {@code text} of type {@code oid}; null for null. */
  static Object convert(int oid, String text) {
    if (text == null) {
      return null;
    }
    Integer element = ARRAYS.get(oid);
    if (element != null) {
      List<String> items = parseArray(text);
      if (items == null) {
        return text; // more than one dimension, or bounds: the text form
      }
      List<Object> out = new ArrayList<>(items.size());
      for (String item : items) {
        out.add(convert(element, item));
      }
      return Collections.unmodifiableList(out);
    }
    switch (oid) {
      case BOOL:
        return text.equals("t");
      case INT2:
      case INT4:
        return Integer.valueOf(text);
      case INT8:
      case OID:
        return Long.valueOf(text);
      case FLOAT4:
      case FLOAT8:
        return switch (text) {
          case "NaN" -> Double.NaN;
          case "Infinity" -> Double.POSITIVE_INFINITY;
          case "-Infinity" -> Double.NEGATIVE_INFINITY;
          default -> Double.valueOf(text);
        };
      case NUMERIC:
        return text.equals("NaN") || text.endsWith("Infinity") ? text : new BigDecimal(text);
      case UUID_TYPE:
        return UUID.fromString(text);
      case JSON_TYPE:
      case JSONB:
        try {
          return JSON.readTree(text);
        } catch (JsonProcessingException e) {
          throw new IllegalArgumentException("not JSON: " + e.getOriginalMessage(), e);
        }
      case BYTEA:
        if (!text.startsWith("\\x")) {
          throw new IllegalArgumentException("bytea not in hex output format (bytea_output = hex expected)");
        }
        return HexFormat.of().parseHex(text, 2, text.length());
      case DATE:
        return isInfinite(text) ? text : LocalDate.parse(text);
      case TIME:
        return LocalTime.parse(text);
      case TIMESTAMP_TYPE:
        return isInfinite(text) ? text : LocalDateTime.parse(text, TIMESTAMP);
      case TIMESTAMPTZ:
        return isInfinite(text) ? text : OffsetDateTime.parse(text, TIMESTAMP);
      default:
        return text;
    }
  }

  private static boolean isInfinite(String text) {
    return text.equals("infinity") || text.equals("-infinity") || text.endsWith(" BC");
  }

  /**
   * The elements of a one-dimensional array literal such as {@code {1,NULL,"a \"b\"",c}}, unquoted
   * and unescaped, {@code NULL} as null; null when the literal has bounds or more dimensions.
   */
  static List<String> parseArray(String text) {
    if (!text.startsWith("{") || !text.endsWith("}")) {
      return null;
    }
    List<String> items = new ArrayList<>();
    String body = text.substring(1, text.length() - 1);
    if (body.isEmpty()) {
      return items;
    }
    int i = 0;
    while (i <= body.length()) {
      if (i < body.length() && body.charAt(i) == '{') {
        return null; // nested: multi-dimensional
      }
      StringBuilder item = new StringBuilder();
      boolean quoted = false;
      if (i < body.length() && body.charAt(i) == '"') {
        quoted = true;
        i++;
        while (i < body.length() && body.charAt(i) != '"') {
          if (body.charAt(i) == '\\' && i + 1 < body.length()) {
            i++;
          }
          item.append(body.charAt(i));
          i++;
        }
        i++; // closing quote
      } else {
        while (i < body.length() && body.charAt(i) != ',') {
          item.append(body.charAt(i));
          i++;
        }
      }
      String value = item.toString();
      items.add(!quoted && value.equals("NULL") ? null : value);
      i++; // the comma
    }
    return items;
  }
}
