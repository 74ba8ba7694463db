package dev.sluice.postgres.feed;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.chrono.IsoEra;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.format.ResolverStyle;
import java.time.format.SignStyle;
import java.time.temporal.ChronoField;
import java.time.temporal.TemporalAccessor;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Column values in PostgreSQL's text output format, as pgoutput sends them, converted to Java. The
 * full mapping, with the relay's JSON form, is {@code docs/postgres-types.md}; in short:
 *
 * <table>
 *   <caption>Type mapping</caption>
 *   <tr><th>PostgreSQL</th><th>Java</th></tr>
 *   <tr><td>boolean</td><td>Boolean</td></tr>
 *   <tr><td>smallint, integer</td><td>Integer</td></tr>
 *   <tr><td>bigint, oid</td><td>Long</td></tr>
 *   <tr><td>real, double precision</td><td>Double (NaN, infinities and -0 included)</td></tr>
 *   <tr><td>numeric</td><td>BigDecimal, without loss ('NaN' and infinities stay text)</td></tr>
 *   <tr><td>text, varchar, char, name</td><td>String</td></tr>
 *   <tr><td>uuid</td><td>UUID</td></tr>
 *   <tr><td>json, jsonb</td><td>Jackson JsonNode (numbers and nesting up to Jackson's limits, 1000)</td></tr>
 *   <tr><td>timestamp with time zone</td><td>OffsetDateTime (offsets in seconds, BC, years past 9999)</td></tr>
 *   <tr><td>timestamp</td><td>LocalDateTime</td></tr>
 *   <tr><td>date</td><td>LocalDate (BC as proleptic ISO years: 1 BC is year 0)</td></tr>
 *   <tr><td>time</td><td>LocalTime; {@code 24:00:00} stays text</td></tr>
 *   <tr><td>bytea</td><td>byte[] (hex or escape output format)</td></tr>
 *   <tr><td>arrays of the above</td><td>List of the element type (nulls kept), nested per dimension</td></tr>
 *   <tr><td>a domain</td><td>as its base type (the caller passes the base type's OID)</td></tr>
 *   <tr><td>anything else (interval, money, inet, ranges, geometric, enums, composite, timetz,
 *       infinite dates and timestamps, arrays with explicit bounds)</td><td>String, the server's
 *       text form</td></tr>
 * </table>
 */
final class PgValues {
  /** json/jsonb numbers are arbitrary precision on the server: read them as BigDecimal, exactly. */
  private static final ObjectMapper JSON = new ObjectMapper()
      .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .setNodeFactory(com.fasterxml.jackson.databind.node.JsonNodeFactory.withExactBigDecimals(true));
  /**
   * PostgreSQL's text form (DateStyle ISO) of dates and timestamps: {@code 2026-11-25 11:49:09.123456+01},
   * a year of four or more digits, an offset of hours, minutes and (before standard time zones) seconds
   * such as {@code +00:17:30}; a BC date ends in {@code " BC"}, removed before parsing.
   */
  private static final DateTimeFormatter DATE_CE = format(false, IsoEra.CE);
  private static final DateTimeFormatter DATE_BC = format(false, IsoEra.BCE);
  private static final DateTimeFormatter TIMESTAMP = format(true, IsoEra.CE);
  private static final DateTimeFormatter TIMESTAMP_BC = format(true, IsoEra.BCE);

  private static DateTimeFormatter format(boolean time, IsoEra era) {
    DateTimeFormatterBuilder b = new DateTimeFormatterBuilder()
        .appendValue(ChronoField.YEAR_OF_ERA, 4, 9, SignStyle.NOT_NEGATIVE)
        .appendPattern("-MM-dd");
    if (time) {
      b.appendPattern(" HH:mm:ss")
          .optionalStart().appendFraction(ChronoField.NANO_OF_SECOND, 0, 9, true).optionalEnd()
          .optionalStart().appendOffset("+HH:mm:ss", "Z").optionalEnd();
    }
    return b.parseDefaulting(ChronoField.ERA, era.getValue()).toFormatter().withResolverStyle(ResolverStyle.STRICT);
  }

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

  /** Names of the built-in types above, for errors. */
  private static final Map<Integer, String> NAMES = Map.ofEntries(
      Map.entry(BOOL, "boolean"), Map.entry(BYTEA, "bytea"), Map.entry(NAME, "name"), Map.entry(INT8, "bigint"),
      Map.entry(INT2, "smallint"), Map.entry(INT4, "integer"), Map.entry(TEXT, "text"), Map.entry(OID, "oid"),
      Map.entry(JSON_TYPE, "json"), Map.entry(FLOAT4, "real"), Map.entry(FLOAT8, "double precision"),
      Map.entry(BPCHAR, "character"), Map.entry(VARCHAR, "character varying"), Map.entry(DATE, "date"),
      Map.entry(TIME, "time without time zone"), Map.entry(TIMESTAMP_TYPE, "timestamp without time zone"),
      Map.entry(TIMESTAMPTZ, "timestamp with time zone"), Map.entry(NUMERIC, "numeric"), Map.entry(UUID_TYPE, "uuid"),
      Map.entry(JSONB, "jsonb"));

  private PgValues() {}

  /** The name of type {@code oid} when built in and mapped (arrays as {@code name[]}), else {@code oid N}. */
  static String typeName(int oid) {
    Integer element = ARRAYS.get(oid);
    String name = NAMES.get(element != null ? element : oid);
    return name == null ? "oid " + oid : element != null ? name + "[]" : name;
  }

  /** The Java value of {@code text} of type {@code oid}; null for null. */
  static Object convert(int oid, String text) {
    if (text == null) {
      return null;
    }
    Integer element = ARRAYS.get(oid);
    if (element != null) {
      Object items = parseArray(text);
      return items == null ? text : convertElements(element, items); // null: bounds, the text form
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
        return text.startsWith("\\x") ? HexFormat.of().parseHex(text, 2, text.length()) : unescapeBytea(text);
      case DATE:
        return isInfinite(text) ? text : LocalDate.from(dateTime(text, false));
      case TIME:
        // 24:00:00 is a time of day in PostgreSQL (the end of the day) but not in java.time.
        return text.startsWith("24:") ? text : LocalTime.parse(text);
      case TIMESTAMP_TYPE:
        return isInfinite(text) ? text : LocalDateTime.from(dateTime(text, true));
      case TIMESTAMPTZ:
        return isInfinite(text) ? text : OffsetDateTime.from(dateTime(text, true));
      default:
        return text;
    }
  }

  private static boolean isInfinite(String text) {
    return text.equals("infinity") || text.equals("-infinity");
  }

  /**
   * A date or timestamp in ISO DateStyle; {@code "0044-03-15 BC"} is year 44 before the common era,
   * which java.time (proleptic ISO, as PostgreSQL's calendar) numbers -43.
   */
  private static TemporalAccessor dateTime(String text, boolean time) {
    boolean bc = text.endsWith(" BC");
    String body = bc ? text.substring(0, text.length() - 3) : text;
    return (time ? (bc ? TIMESTAMP_BC : TIMESTAMP) : (bc ? DATE_BC : DATE_CE)).parse(body);
  }

  /**
   * bytea in the escape output format ({@code bytea_output = escape}): printable ASCII as itself, a
   * backslash doubled, every other byte as a backslash and three octal digits.
   */
  private static byte[] unescapeBytea(String text) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(text.length());
    int i = 0;
    while (i < text.length()) {
      char c = text.charAt(i);
      if (c != '\\') {
        if (c > 0x7e) {
          throw new IllegalArgumentException("bytea in escape format holds a character that is not ASCII at " + i);
        }
        out.write(c);
        i++;
      } else if (i + 1 < text.length() && text.charAt(i + 1) == '\\') {
        out.write('\\');
        i += 2;
      } else if (isOctal(text, i + 1) && isOctal(text, i + 2) && isOctal(text, i + 3)) {
        out.write(Integer.parseInt(text.substring(i + 1, i + 4), 8));
        i += 4;
      } else {
        throw new IllegalArgumentException("bytea in escape format has a backslash not followed by a backslash or"
            + " three octal digits at " + i);
      }
    }
    return out.toByteArray();
  }

  private static boolean isOctal(String text, int i) {
    return i < text.length() && text.charAt(i) >= '0' && text.charAt(i) <= '7';
  }

  /** The converted elements of a (possibly nested) list of element texts. */
  private static List<Object> convertElements(int element, Object items) {
    List<?> in = (List<?>) items;
    List<Object> out = new ArrayList<>(in.size());
    for (Object item : in) {
      out.add(item instanceof List<?> nested ? convertElements(element, nested) : convert(element, (String) item));
    }
    return Collections.unmodifiableList(out);
  }

  /**
   * The elements of an array literal such as {@code {1,NULL,"a \"b\"",c}} or {@code {{1,2},{3,4}}},
   * unquoted and unescaped, {@code NULL} as null, each dimension a nested list; null when the literal
   * has explicit bounds ({@code [0:1]={...}}).
   */
  static List<Object> parseArray(String text) {
    if (!text.startsWith("{") || !text.endsWith("}")) {
      return null;
    }
    int[] at = {0};
    List<Object> out = parseLevel(text, at);
    if (at[0] != text.length()) {
      throw new IllegalArgumentException("array literal has text after its closing brace at " + at[0]);
    }
    return out;
  }

  /** The list starting at the brace at {@code at[0]}; leaves {@code at[0]} after its closing brace. */
  private static List<Object> parseLevel(String text, int[] at) {
    List<Object> items = new ArrayList<>();
    int i = at[0] + 1; // after '{'
    if (i < text.length() && text.charAt(i) == '}') {
      at[0] = i + 1;
      return items;
    }
    while (true) {
      if (i >= text.length()) {
        throw new IllegalArgumentException("array literal ends inside an element");
      }
      char c = text.charAt(i);
      if (c == '{') {
        at[0] = i;
        items.add(parseLevel(text, at));
        i = at[0];
      } else if (c == '"') {
        StringBuilder item = new StringBuilder();
        i++;
        while (i < text.length() && text.charAt(i) != '"') {
          if (text.charAt(i) == '\\' && i + 1 < text.length()) {
            i++;
          }
          item.append(text.charAt(i));
          i++;
        }
        i++; // the closing quote
        items.add(item.toString());
      } else {
        int start = i;
        while (i < text.length() && text.charAt(i) != ',' && text.charAt(i) != '}') {
          i++;
        }
        String item = text.substring(start, i);
        items.add(item.equals("NULL") ? null : item);
      }
      if (i >= text.length()) {
        throw new IllegalArgumentException("array literal ends inside an element");
      }
      if (text.charAt(i) == '}') {
        at[0] = i + 1;
        return items;
      }
      i++; // the comma
    }
  }
}
