package dev.sluice.postgres.feed;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.sink.DocumentMapper;
import java.math.BigDecimal;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.temporal.TemporalAccessor;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The JSON form of PostgreSQL feed rows, for the sinks' envelope ({@link #mapper()}): every type
 * {@link PgValues} produces keeps its value exactly. {@code numeric} is a JSON number with all its
 * digits (no rounding through double); timestamps, dates and times are ISO-8601 strings (with the
 * offset for {@code timestamptz}); {@code bytea} is base64; {@code uuid} a string; {@code
 * json}/{@code jsonb} is embedded as JSON; arrays are JSON arrays; NaN and infinities of floats are
 * the strings {@code "NaN"}, {@code "Infinity"}, {@code "-Infinity"} (JSON has no such numbers);
 * unmapped types stay the server's text.
 *
 * <p>{@link #encode} and {@link #decode} store a row as text and read it back with every value of
 * the same Java type and value (for dead-letter stores, {@code JdbcDeadLetterStore.builder(ds,
 * PostgresDocuments::encode, PostgresDocuments::decode)}).
 */
public final class PostgresDocuments {
  private static final JsonNodeFactory NODES = JsonNodeFactory.withExactBigDecimals(true);

  private PostgresDocuments() {}

  /** The mapper for {@code MessageEncoder.builder(PostgresDocuments.mapper())}. */
  public static DocumentMapper<Map<String, Object>> mapper() {
    return PostgresDocuments::toJson;
  }

  /** A row as a JSON object, columns in the row's order. */
  public static ObjectNode toJson(Map<String, Object> row) {
    ObjectNode out = NODES.objectNode();
    row.forEach((column, value) -> out.set(column, value(value)));
    return out;
  }

  private static final ObjectMapper JSON = new ObjectMapper().setNodeFactory(NODES)
      .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);

  /**
   * A row as text that {@link #decode} turns back into an equal row: each value tagged with its
   * type ({@code {"amount":["numeric","12.50"],"at":["timestamptz","2026-...+02:00"]}}).
   */
  public static String encode(Map<String, Object> row) {
    ObjectNode out = NODES.objectNode();
    row.forEach((column, value) -> out.set(column, tagged(value)));
    try {
      return JSON.writeValueAsString(out);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The row {@link #encode} wrote; an IllegalArgumentException naming the problem for other text. */
  public static Map<String, Object> decode(String text) {
    try {
      JsonNode root = JSON.readTree(text);
      Map<String, Object> out = new LinkedHashMap<>();
      for (Iterator<Map.Entry<String, JsonNode>> it = root.fields(); it.hasNext(); ) {
        Map.Entry<String, JsonNode> e = it.next();
        out.put(e.getKey(), untagged(e.getValue()));
      }
      return Collections.unmodifiableMap(out);
    } catch (JsonProcessingException | RuntimeException e) {
      throw new IllegalArgumentException("not a row written by PostgresDocuments.encode: " + e.getMessage(), e);
    }
  }

  private static JsonNode tagged(Object v) {
    if (v == null) {
      return NODES.nullNode();
    }
    ArrayNode a = NODES.arrayNode(2);
    if (v instanceof List<?> list) {
      ArrayNode items = NODES.arrayNode(list.size());
      list.forEach(item -> items.add(tagged(item)));
      return a.add("list").add(items);
    }
    if (v instanceof JsonNode json) {
      return a.add("json").add(json);
    }
    String tag = v instanceof Boolean ? "bool" : v instanceof Integer ? "int" : v instanceof Long ? "long"
        : v instanceof BigDecimal ? "numeric" : v instanceof Double ? "double" : v instanceof UUID ? "uuid"
        : v instanceof byte[] ? "bytea" : v instanceof OffsetDateTime ? "timestamptz"
        : v instanceof LocalDateTime ? "timestamp" : v instanceof LocalDate ? "date"
        : v instanceof LocalTime ? "time" : "text";
    String text = v instanceof byte[] bytes ? Base64.getEncoder().encodeToString(bytes)
        : v instanceof BigDecimal d ? d.toString() : v.toString();
    return a.add(tag).add(text);
  }

  private static Object untagged(JsonNode node) {
    if (node.isNull()) {
      return null;
    }
    String tag = node.get(0).asText();
    JsonNode value = node.get(1);
    return switch (tag) {
      case "list" -> {
        List<Object> items = new ArrayList<>();
        value.forEach(item -> items.add(untagged(item)));
        yield Collections.unmodifiableList(items);
      }
      case "json" -> value;
      case "bool" -> Boolean.valueOf(value.asText());
      case "int" -> Integer.valueOf(value.asText());
      case "long" -> Long.valueOf(value.asText());
      case "numeric" -> new BigDecimal(value.asText());
      case "double" -> Double.valueOf(value.asText());
      case "uuid" -> UUID.fromString(value.asText());
      case "bytea" -> Base64.getDecoder().decode(value.asText());
      case "timestamptz" -> OffsetDateTime.parse(value.asText());
      case "timestamp" -> LocalDateTime.parse(value.asText());
      case "date" -> LocalDate.parse(value.asText());
      case "time" -> LocalTime.parse(value.asText());
      case "text" -> value.asText();
      default -> throw new IllegalArgumentException("unknown type tag '" + tag + "'");
    };
  }

  private static JsonNode value(Object v) {
    if (v == null) {
      return NODES.nullNode();
    }
    if (v instanceof JsonNode json) {
      return json;
    }
    if (v instanceof Boolean b) {
      return NODES.booleanNode(b);
    }
    if (v instanceof Integer i) {
      return NODES.numberNode(i);
    }
    if (v instanceof Long l) {
      return NODES.numberNode(l);
    }
    if (v instanceof BigDecimal d) {
      return NODES.numberNode(d);
    }
    if (v instanceof Double d) {
      return d.isNaN() || d.isInfinite() ? NODES.textNode(d.toString()) : NODES.numberNode(d);
    }
    if (v instanceof byte[] bytes) {
      return NODES.textNode(Base64.getEncoder().encodeToString(bytes));
    }
    if (v instanceof List<?> list) {
      ArrayNode a = NODES.arrayNode(list.size());
      list.forEach(item -> a.add(value(item)));
      return a;
    }
    if (v instanceof UUID || v instanceof TemporalAccessor || v instanceof String) {
      return NODES.textNode(v.toString()); // java.time's toString is ISO-8601
    }
    return NODES.textNode(v.toString());
  }
}
