package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Rows as a real PostgreSQL 17 sends them, through the sinks' JSON form (exact numerics, ISO
 * times, base64 bytes, embedded JSON) and through the dead-letter text form and back (every value
 * of the same type and value).
 */
class PostgresDocumentsTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private final String db = PG.createDatabase("docs");

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private Map<String, Object> row() throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("DROP PUBLICATION IF EXISTS pub");
      s.execute("DROP TABLE IF EXISTS t");
      s.execute("CREATE TABLE t (id int PRIMARY KEY, amount numeric(40,20), at timestamptz, local timestamp,"
          + " day date, clock time, doc jsonb, tags text[], nums bigint[], uid uuid, raw bytea, flag boolean,"
          + " ratio double precision, inf real, note text, span interval)");
      s.execute("CREATE PUBLICATION pub FOR TABLE t");
    }
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    try (FeedCursor<Map<String, Object>> cursor = feed.open(PartitionSpec.single(), StartPoint.latest());
        Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("INSERT INTO t VALUES (1, 12345678901234567890.01234567890123456789, '2026-11-25 10:15:30.5+02',"
          + " '2026-11-25 10:15:00', '2026-11-25', '23:59:59.999999', '{\"a\": [1, 2.50], \"b\": null}',"
          + " '{x,\"y z\",NULL}', '{9007199254740993}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x00ff10',"
          + " false, 'NaN', '-Infinity', 'héllo \"quoted\"', '3 days')");
      List<ChangeEvent<Map<String, Object>>> events = new ArrayList<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (events.isEmpty() && System.nanoTime() < deadline) {
        events.addAll(cursor.poll(Duration.ofMillis(200)));
      }
      assertThat(events).hasSize(1);
      return events.get(0).document();
    }
  }

  @Test
  void theJsonFormKeepsEveryValueExactly() throws Exception {
    // Read back as a consumer keeping decimals exactly would.
    ObjectMapper reader = new ObjectMapper()
        .enable(com.fasterxml.jackson.databind.DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS);
    JsonNode json = reader.readTree(new ObjectMapper().writeValueAsString(PostgresDocuments.mapper().toJson(row())));
    assertThat(json.get("amount").isNumber()).isTrue();
    assertThat(json.get("amount").decimalValue()).isEqualByComparingTo("12345678901234567890.01234567890123456789");
    assertThat(new ObjectMapper().writeValueAsString(PostgresDocuments.toJson(row())))
        .as("all the digits in the text").contains("12345678901234567890.01234567890123456789");
    assertThat(json.get("at").asText()).isIn("2026-11-25T08:15:30.500Z", "2026-11-25T08:15:30.5Z")
        .as("timestamptz with its offset, the same instant");
    assertThat(json.get("local").asText()).isEqualTo("2026-11-25T10:15");
    assertThat(json.get("day").asText()).isEqualTo("2026-11-25");
    assertThat(json.get("clock").asText()).isEqualTo("23:59:59.999999");
    assertThat(json.get("doc").get("a").get(1).decimalValue()).isEqualByComparingTo("2.50");
    assertThat(json.get("doc").get("b").isNull()).isTrue();
    assertThat(json.get("tags").toString()).isEqualTo("[\"x\",\"y z\",null]");
    assertThat(json.get("nums").get(0).asLong()).isEqualTo(9007199254740993L);
    assertThat(json.get("uid").asText()).isEqualTo("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assertThat(json.get("raw").asText()).isEqualTo("AP8Q");
    assertThat(json.get("flag").asBoolean()).isFalse();
    assertThat(json.get("ratio").asText()).isEqualTo("NaN");
    assertThat(json.get("inf").asText()).isEqualTo("-Infinity");
    assertThat(json.get("note").asText()).isEqualTo("héllo \"quoted\"");
    assertThat(json.get("span").asText()).isEqualTo("3 days");
  }

  @Test
  void theTextFormReadsBackEveryValueWithItsType() throws Exception {
    Map<String, Object> row = row();
    Map<String, Object> back = PostgresDocuments.decode(PostgresDocuments.encode(row));
    assertThat(back.keySet()).containsExactlyElementsOf(row.keySet());
    for (String column : row.keySet()) {
      Object before = row.get(column);
      Object after = back.get(column);
      if (before instanceof byte[] bytes) {
        assertThat((byte[]) after).as(column).containsExactly(bytes);
      } else {
        assertThat(after).as(column).isEqualTo(before);
        assertThat(after == null ? null : after.getClass()).as(column).isEqualTo(before == null ? null : before.getClass());
      }
    }
    assertThatThrownBy(() -> PostgresDocuments.decode("{\"a\": [\"money\", \"1\"]}"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unknown type tag 'money'");
    assertThatThrownBy(() -> PostgresDocuments.decode("not json"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not a row written by");
  }
}
