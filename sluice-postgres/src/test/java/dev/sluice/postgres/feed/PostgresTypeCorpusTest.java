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
 * <p>Where the documented mapping ({@code docs/postgres-types.md}) differs from {@code to_jsonb},
 * the column's {@link Rule} says how, one rule per type, each written in that document: there is no
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

  record Column(String name, String type, Rule rule) {}

  record Case(String column, String literal) {}

  record Group(String table, List<Column> columns, List<Case> cases) {}

  private static Group group(String table, List<Column> columns, String... cases) {
    List<Case> out = new ArrayList<>();
    for (String c : cases) {
      int eq = c.indexOf('=');
      out.add(new Case(c.substring(0, eq), c.substring(eq + 1)));
    }
    return new Group(table, columns, out);
  }

  private static Column col(String name, String type, Rule rule) {
    return new Column(name, type, rule);
  }

  static final List<String> TYPES = List.of(
      "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
      "CREATE DOMAIN posint AS int CHECK (VALUE > 0)",
      "CREATE TYPE pair AS (n int, s text)");

  static final List<Group> GROUPS = List.of(
      group("c_int", List.of(col("i2", "smallint", Rule.JSON), col("i4", "integer", Rule.JSON),
              col("i8", "bigint", Rule.JSON), col("b", "boolean", Rule.JSON)),
          "i2=-32768", "i2=32767", "i4=-2147483648", "i4=2147483647", "i8=-9223372036854775808",
          "i8=9223372036854775807", "b=true", "b=false"),
      group("c_numeric", List.of(col("n", "numeric", Rule.JSON), col("ns", "numeric(12,4)", Rule.JSON)),
          "n=1234567890123456789012345678901234567890", "n=-0.0000000000000000000000000000000000000001",
          "n='NaN'", "n='Infinity'", "n='-Infinity'", "ns=1.5000", "ns=-0.0001"),
      group("c_float", List.of(col("f4", "real", Rule.FLOAT), col("f8", "double precision", Rule.FLOAT)),
          "f4='NaN'", "f4='Infinity'", "f4='-Infinity'", "f4='-0'", "f4=3.4028235e38", "f4=0.1",
          "f8='NaN'", "f8='Infinity'", "f8='-Infinity'", "f8='-0'", "f8=1.7976931348623157e308",
          "f8=4.9e-324", "f8=0.1"),
      group("c_text", List.of(col("t", "text", Rule.JSON), col("c", "char(5)", Rule.JSON),
              col("vc", "varchar(20)", Rule.JSON)),
          "t='emoji \uD83D\uDE00 and \u2028 line separator'", "t='quote '' \" \\ backslash, comma {}'",
          "t=''", "c='ab'", "vc='x\ny'"),
      group("c_bytea", List.of(col("by", "bytea", Rule.BYTEA)),
          "by='\\x00ff10'", "by='\\x'", "by='\\x5c2722e282ac'"),
      group("c_date", List.of(col("d", "date", Rule.TEMPORAL)),
          "d='infinity'", "d='-infinity'", "d='0044-03-15 BC'", "d='10000-01-01'", "d='2026-02-28'",
          "d='0001-01-01'"),
      group("c_time", List.of(col("tm", "time", Rule.TEMPORAL), col("ttz", "timetz", Rule.JSON)),
          "tm='24:00:00'", "tm='00:00:00'", "tm='23:59:59.999999'", "ttz='12:34:56.789+05:30'",
          "ttz='24:00:00-15:59'"),
      group("c_stamp", List.of(col("ts", "timestamp", Rule.TEMPORAL), col("tz", "timestamptz", Rule.INSTANT)),
          "ts='infinity'", "ts='-infinity'", "ts='2026-11-25 10:15:30.123456'", "ts='2026-11-25 10:15:00'",
          "ts='0044-03-15 12:00:00 BC'", "ts='10000-01-01 00:00:00'", "ts='1900-01-01 00:00:00'",
          "tz='infinity'", "tz='-infinity'", "tz='2026-11-25 10:15:30.123456+02'", "tz='1900-01-01 00:00:00+00'",
          "tz='1800-06-01 12:00:00+00'", "tz='0044-03-15 12:00:00+00 BC'", "tz='10000-01-01 00:00:00+00'"),
      group("c_interval", List.of(col("iv", "interval", Rule.JSON)),
          "iv='1 year 2 months 3 days 04:05:06.789'", "iv='-1 mons +2 days -03:00:00'", "iv='0'",
          "iv='-178000000 years'"),
      group("c_misc", List.of(col("u", "uuid", Rule.JSON), col("j", "json", Rule.JSON), col("jb", "jsonb", Rule.JSON)),
          "u='a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'", "j='{\"a\": 1, \"a\": 2, \"b\": [1, 2.50]}'",
          "jb='{\"big\": 9007199254740993, \"neg\": -9223372036854775809, \"f\": 1.10, \"s\": \"\\u2028\"}'",
          "jb='[]'", "jb='\"just a string\"'"),
      group("c_array", List.of(col("ai", "int[]", Rule.JSON), col("at", "text[]", Rule.JSON),
              col("a2", "int[][]", Rule.JSON), col("an", "numeric[]", Rule.JSON), col("au", "uuid[]", Rule.JSON),
              col("ab", "boolean[]", Rule.JSON), col("af", "double precision[]", Rule.JSON),
              col("aj", "jsonb[]", Rule.JSON), col("a3", "text[][][]", Rule.JSON)),
          "ai='{1,NULL,3}'", "ai='{}'", "at=ARRAY['a,b', 'c\"d', NULL, 'NULL', '', 'x y', 'back\\slash', '{}']",
          "a2='{{1,2},{3,NULL}}'", "an='{1.50,NaN}'", "au='{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11,NULL}'",
          "ab='{t,f,NULL}'", "af='{NaN,Infinity,-Infinity,0.1}'",
          "aj=ARRAY['{\"a\": [1, 9007199254740993]}'::jsonb, NULL, '\"s\"'::jsonb]",
          "a3=ARRAY[[['a', 'b,c'], ['{', NULL]], [['}', '\"'], ['', 'NULL']]]"),
      group("c_user", List.of(col("e", "mood", Rule.JSON), col("dm", "posint", Rule.JSON),
              col("cp", "pair", Rule.TEXT), col("r", "int4range", Rule.JSON), col("dr", "daterange", Rule.JSON)),
          "e='happy'", "dm=5", "cp=ROW(1, 'x, \"y\"')", "r='[1,10)'", "r='empty'", "dr='[2026-01-01,infinity)'"),
      group("c_net", List.of(col("ip", "inet", Rule.JSON), col("cn", "cidr", Rule.JSON), col("mac", "macaddr", Rule.JSON)),
          "ip='192.168.0.1/24'", "ip='::1'", "cn='10.0.0.0/8'", "mac='08:00:2b:01:02:03'"),
      group("c_other", List.of(col("m", "money", Rule.JSON), col("bt", "bit(4)", Rule.JSON),
              col("vb", "varbit", Rule.JSON), col("x", "xml", Rule.JSON), col("tv", "tsvector", Rule.JSON)),
          "m='-12.34'", "bt=B'1010'", "vb=B'101'", "x='<a b=\"1\">t &amp; u</a>'", "tv='a fat:2 cat'"));

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
      StringBuilder ddl = new StringBuilder("CREATE TABLE " + g.table() + " (id int PRIMARY KEY");
      g.columns().forEach(c -> ddl.append(", ").append(c.name()).append(' ').append(c.type()));
      setup.add(ddl.append(')').toString());
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
                  + col.rule() + "): " + problem);
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
    switch (col.rule()) {
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
        throw new IllegalStateException(col.rule().name());
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
