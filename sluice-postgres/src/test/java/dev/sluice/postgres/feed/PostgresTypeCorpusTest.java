package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.feed.UndecodableChange;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import dev.sluice.testkit.sql.PostgresTypeCorpus;
import dev.sluice.testkit.sql.PostgresTypeCorpus.Case;
import dev.sluice.testkit.sql.PostgresTypeCorpus.Column;
import dev.sluice.testkit.sql.PostgresTypeCorpus.Group;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 A: the server is the oracle. A table per group of types, each edge value written by SQL
 * in a transaction of its own; the change the feed gives for it is compared, column by column,
 * with what the server itself says the row is ({@code to_jsonb(t)} read right after the write),
 * through the relay's JSON form ({@link PostgresDocuments#toJson}) and, where JSON cannot tell (the
 * sign of a float zero, a Java type), through the document's Java value.
 *
 * <p>The tables and values are {@link PostgresTypeCorpus} (sluice-testkit, shared with the
 * Debezium side by side). Where the documented mapping ({@code docs/postgres-types.md}) differs
 * from {@code to_jsonb}, the column's {@link Rule} says how, one rule per type, each written in that document: there is no
 * blanket loosening. A change the feed cannot deliver (an exception from {@code poll}, or an
 * undecodable change) counts as a stall.
 *
 * <p>The feed's JVM runs in Europe/Amsterdam while the cursor opens (the session's time zone is
 * the JVM's, as pgjdbc sends it), so timestamps before 1937 print with an offset in seconds
 * (+00:19:32), as they do for a listener deployed there.
 */
class PostgresTypeCorpusTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final ObjectMapper JSON = new ObjectMapper()
      .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
      .setNodeFactory(JsonNodeFactory.withExactBigDecimals(true));

  /** How a column's change is compared with the server's word. */
  enum Rule {
    /** The relay's JSON equals {@code to_jsonb}'s. */
    JSON,
    /** The server's text ({@code v::text}) as a JSON string: the type maps to its text form. */
    TEXT,
    /**
     * real/double: the Java value equals the server's text read as a double, -0 and NaN included
     * (jsonb has no -0); the relay's number denotes the same double as {@code to_jsonb}'s (their
     * shortest decimal forms differ: {@code 4.9E-324} and {@code 5e-324}).
     */
    FLOAT,
    /** bytea: the relay's base64 decodes to the bytes of {@code to_jsonb}'s hex form. */
    BYTEA,
    /** date/timestamp/time: the Java value equals the server's ISO text; infinity and 24:00 stay text. */
    TEMPORAL,
    /** timestamptz: the same instant as {@code to_jsonb}'s; infinities stay text. */
    INSTANT
  }

  /**
   * The rule of each corpus column ({@link PostgresTypeCorpus}, shared with the Debezium side by
   * side in sluice-benchmarks-debezium); a column not named here is compared as {@link Rule#JSON}.
   */
  private static final Map<String, Rule> RULES = Map.of("f4", Rule.FLOAT, "f8", Rule.FLOAT, "by", Rule.BYTEA,
      "d", Rule.TEMPORAL, "tm", Rule.TEMPORAL, "ts", Rule.TEMPORAL, "tz", Rule.INSTANT, "cp", Rule.TEXT);

  private static Rule rule(Column column) {
    return RULES.getOrDefault(column.name(), Rule.JSON);
  }

  static final List<String> TYPES = PostgresTypeCorpus.TYPES;

  static final List<Group> GROUPS = PostgresTypeCorpus.GROUPS;

  private final List<String> databases = new ArrayList<>();

  @AfterEach
  void dropSlots() {
    databases.forEach(PG::dropReplicationSlots);
  }

  @Test
  void everyTypeArrivesAsTheServerSaysTheRowIs() throws Exception {
    assertThat(run("corpus", List.of(), GROUPS)).as("cases that differ from the server's word").isEmpty();
  }

  /**
   * The walsender prints values in its session's {@code bytea_output} and {@code IntervalStyle},
   * which a database (or role) setting can change: the feed sets the forms it reads on its own
   * sessions. The oracle's session sets them back to the defaults.
   */
  @Test
  void byteaAndIntervalsWithTheDatabaseSetToOtherOutputFormsArriveAsTheServerSaysTheRowIs() throws Exception {
    List<Group> groups = GROUPS.stream().filter(g -> g.table().equals("c_bytea") || g.table().equals("c_interval"))
        .toList();
    assertThat(run("corpusescape", List.of("bytea_output = 'escape'", "IntervalStyle = 'iso_8601'"), groups))
        .as("cases that differ from the server's word").isEmpty();
  }

  /** Writes every case and compares; returns one line per case that differs or stalled. */
  private List<String> run(String name, List<String> databaseSettings, List<Group> groups) throws Exception {
    String db = PG.createDatabase(name);
    databases.add(db);
    // The shared server may hold this database from an earlier run: start from an empty one.
    List<String> setup = new ArrayList<>(List.of("DROP PUBLICATION IF EXISTS pub", "DROP SCHEMA public CASCADE",
        "CREATE SCHEMA public", "ALTER DATABASE " + db + " RESET ALL"));
    setup.addAll(TYPES);
    StringBuilder tables = new StringBuilder();
    for (Group g : groups) {
      setup.add(g.createTable());
      tables.append(tables.length() == 0 ? "" : ", ").append(g.table());
    }
    setup.add("CREATE PUBLICATION pub FOR TABLE " + tables);
    for (String s : databaseSettings) {
      setup.add("ALTER DATABASE " + db + " SET " + s);
    }
    sql(db, setup);

    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .build();
    TimeZone zone = TimeZone.getDefault();
    FeedCursor<Map<String, Object>> cursor;
    TimeZone.setDefault(TimeZone.getTimeZone("Europe/Amsterdam"));
    try {
      cursor = feed.open(PartitionSpec.single(), StartPoint.latest());
    } finally {
      TimeZone.setDefault(zone);
    }
    List<String> differences = new ArrayList<>();
    int cases = 0;
    try (cursor; Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      // The oracle's own text forms, whatever the database says.
      s.execute("SET bytea_output = 'hex'; SET IntervalStyle = 'postgres'");
      int id = 0;
      for (Group g : groups) {
        for (Case k : g.cases()) {
          id++;
          cases++;
          String label = g.table() + "." + k.column() + " = " + k.literal();
          s.execute("INSERT INTO " + g.table() + " (id, " + k.column() + ") VALUES (" + id + ", " + k.literal() + ")");
          JsonNode oracle;
          Map<String, String> texts = new LinkedHashMap<>();
          StringBuilder select = new StringBuilder("SELECT to_jsonb(o)::text");
          g.columns().forEach(col -> select.append(", ").append(col.name()).append("::text"));
          try (ResultSet rs = s.executeQuery(select + " FROM " + g.table() + " o WHERE id = " + id)) {
            rs.next();
            oracle = JSON.readTree(rs.getString(1));
            for (int i = 0; i < g.columns().size(); i++) {
              texts.put(g.columns().get(i).name(), rs.getString(i + 2));
            }
          }
          ChangeEvent<Map<String, Object>> change;
          try {
            change = next(cursor);
          } catch (RuntimeException e) {
            differences.add("STALL    " + label + ": " + e);
            continue;
          }
          if (change == null) {
            differences.add("STALL    " + label + ": no change within 30 s");
            continue;
          }
          if (change.raw() instanceof UndecodableChange u) {
            differences.add("STALL    " + label + ": undecodable: " + u.reason());
            continue;
          }
          JsonNode relay = JSON.readTree(JSON.writeValueAsString(PostgresDocuments.toJson(change.document())));
          assertThat(relay.get("id").asInt()).isEqualTo(id);
          for (Column col : g.columns()) {
            String problem = compare(col, oracle.get(col.name()), texts.get(col.name()),
                change.document().get(col.name()), relay.get(col.name()));
            if (problem != null) {
              differences.add("MISMATCH " + label + ": column " + col.name() + " (" + col.type() + ", rule "
                  + rule(col) + "): " + problem);
            }
          }
        }
      }
    }
    long mismatched = differences.stream().map(d -> d.substring(9, d.indexOf(':'))).distinct().count();
    System.out.println("Type corpus " + name + ": " + cases + " cases, " + mismatched + " differ or stall");
    differences.forEach(d -> System.out.println("  " + d));
    return differences;
  }

  /** Null when the change's value is what the server says, else what differs. */
  private static String compare(Column col, JsonNode oracle, String text, Object value, JsonNode relay) {
    if (oracle == null || oracle.isNull() || text == null) {
      return value == null && relay != null && relay.isNull() ? null
          : "the server says null, the change has " + value + " / " + relay;
    }
    switch (rule(col)) {
      case JSON:
        return relay.equals(oracle) ? null : "relay " + relay + ", to_jsonb " + oracle;
      case TEXT:
        return relay.isTextual() && relay.asText().equals(text) ? null : "relay " + relay + ", server text " + text;
      case FLOAT: {
        double expected = Double.parseDouble(text);
        if (!(value instanceof Double d) || Double.compare(d, expected) != 0) {
          return "document " + value + ", server text " + text;
        }
        boolean special = Double.isNaN(expected) || Double.isInfinite(expected);
        boolean ok = special ? relay.isTextual() && relay.asText().equals(text)
            : relay.isNumber() && oracle.isNumber() && relay.doubleValue() == oracle.doubleValue();
        return ok ? null : "relay " + relay + ", to_jsonb " + oracle;
      }
      case BYTEA: {
        if (!oracle.asText().startsWith("\\x")) {
          return "the oracle's bytea is not hex: " + oracle;
        }
        byte[] expected = HexFormat.of().parseHex(oracle.asText().substring(2));
        byte[] relayed;
        try {
          relayed = Base64.getDecoder().decode(relay.asText());
        } catch (IllegalArgumentException e) {
          return "relay " + relay + " is not base64";
        }
        return java.util.Arrays.equals(expected, relayed) && value instanceof byte[] b && java.util.Arrays.equals(b, expected)
            ? null : "relay " + relay + ", to_jsonb " + oracle;
      }
      case TEMPORAL: {
        String o = oracle.asText();
        if (o.equals("infinity") || o.equals("-infinity") || o.equals("24:00:00")) {
          return o.equals(value) && relay.asText().equals(o) ? null : "document " + value + ", to_jsonb " + oracle;
        }
        Object expected = temporal(o);
        return expected.equals(value) && relay.asText().equals(value.toString()) ? null
            : "document " + value + " (" + (value == null ? null : value.getClass().getSimpleName()) + "), relay "
                + relay + ", to_jsonb " + oracle;
      }
      case INSTANT: {
        String o = oracle.asText();
        if (o.equals("infinity") || o.equals("-infinity")) {
          return o.equals(value) && relay.asText().equals(o) ? null : "document " + value + ", to_jsonb " + oracle;
        }
        Instant expected = instant(o);
        return value instanceof OffsetDateTime t && t.toInstant().equals(expected)
            && OffsetDateTime.parse(relay.asText()).toInstant().equals(expected) ? null
            : "document " + value + ", relay " + relay + ", to_jsonb " + oracle;
      }
      default:
        throw new IllegalStateException(rule(col).name());
    }
  }

  /** to_jsonb's ISO text of a date, timestamp or time ("0044-03-15 BC": year 1 BC is ISO year 0). */
  private static Object temporal(String o) {
    boolean bc = o.endsWith(" BC");
    String iso = bc ? o.substring(0, o.length() - 3) : o;
    if (iso.indexOf('-') > 4) {
      iso = "+" + iso; // a year past 9999, as ISO-8601 writes it
    }
    if (iso.contains("T")) {
      LocalDateTime t = LocalDateTime.parse(iso, DateTimeFormatter.ISO_LOCAL_DATE_TIME);
      return bc ? t.withYear(1 - t.getYear()) : t;
    }
    if (iso.contains(":")) {
      return LocalTime.parse(iso);
    }
    LocalDate d = LocalDate.parse(iso);
    return bc ? d.withYear(1 - d.getYear()) : d;
  }

  private static Instant instant(String o) {
    boolean bc = o.endsWith(" BC");
    String iso = bc ? o.substring(0, o.length() - 3) : o;
    if (iso.indexOf('-') > 4) {
      iso = "+" + iso; // a year past 9999
    }
    OffsetDateTime t = OffsetDateTime.parse(iso);
    return (bc ? t.withYear(1 - t.getYear()) : t).toInstant();
  }

  /** The next change, or null after 30 s. */
  private static ChangeEvent<Map<String, Object>> next(FeedCursor<Map<String, Object>> cursor) {
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (System.nanoTime() < deadline) {
      List<ChangeEvent<Map<String, Object>>> got = cursor.poll(Duration.ofMillis(200));
      if (!got.isEmpty()) {
        assertThat(got).hasSize(1);
        return got.get(0);
      }
    }
    return null;
  }

  private static void sql(String db, List<String> statements) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }
}
