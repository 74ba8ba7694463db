package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.feed.UndecodableChange;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 defect 1: a value the feed cannot convert used to throw out of {@code poll} before the
 * partition filter, so every partition reopened at its checkpoint for ever. Values PostgreSQL
 * writes that java.time did not read ({@code time '24:00'}, a year past 9999) now convert; a value
 * that still cannot be (a jsonb number of more digits than Jackson reads, 1000) is an undecodable
 * change of its own key naming table, column, type and text, and every other key and partition
 * goes on. Rows of other partitions are not converted at all.
 */
class PostgresUnconvertibleValueTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final Duration WAIT = Duration.ofMillis(200);
  /** A jsonb document the server holds exactly and Jackson refuses (numbers up to 1000 digits). */
  static final String POISON = "('{\"n\": 1' || repeat('0', 1200) || '}')::jsonb";

  private final String db = PG.createDatabase("unconvertible");

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private void sql(String... statements) throws SQLException {
    FeedTestSupport.sql(db, statements);
  }

  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    return FeedTestSupport.read(c, count, WAIT);
  }

  @Test
  void aValueNoMappingReadsIsAnUndecodableChangeOfItsKeyAndTheFeedGoesOnWithTheNextRows() throws Exception {
    sql("DROP PUBLICATION IF EXISTS pub", "DROP TABLE IF EXISTS t",
        "CREATE TABLE t (id int PRIMARY KEY, doc jsonb, at time, day date)", "CREATE PUBLICATION pub FOR TABLE t");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t VALUES (1, '{\"a\": 1}', '12:00', '2026-01-01')",
          "INSERT INTO t VALUES (2, " + POISON + ", '12:00', '2026-01-01')",
          "INSERT INTO t VALUES (3, '{}', '24:00', '10000-01-01')",
          "UPDATE t SET at = '13:00' WHERE id = 1");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 4);
      assertThat(events).extracting(ChangeEvent::key).containsExactly(key(1), key(2), key(3), key(1));

      ChangeEvent<Map<String, Object>> poisoned = events.get(1);
      assertThat(poisoned.raw()).isInstanceOf(UndecodableChange.class);
      assertThat(poisoned.document()).isNull();
      assertThat(poisoned.documentState()).isEqualTo(DocumentState.NONE);
      assertThat(poisoned.documentKey()).isEqualTo(Map.of("id", "2"));
      UndecodableChange u = (UndecodableChange) poisoned.raw();
      assertThat(u.reason()).contains("public.t").contains("column doc").contains("type jsonb")
          .contains("{\"n\": 1000000").contains("(1208 characters)").contains(poisoned.id());
      @SuppressWarnings("unchecked")
      Map<String, Object> source = (Map<String, Object>) u.source();
      assertThat(source).containsEntry("table", "public.t");
      assertThat(source.get("columns")).as("the row's texts, kept").isEqualTo(Map.of("id", "2",
          "doc", "{\"n\": 1" + "0".repeat(1200) + "}", "at", "12:00:00", "day", "2026-01-01"));

      assertThat(events.get(2).document()).containsEntry("at", "24:00:00")
          .containsEntry("day", java.time.LocalDate.of(10000, 1, 1));
      assertThat(events.get(3).document()).containsEntry("at", LocalTime.of(13, 0));
    }
  }

  @Test
  void aPartitionConvertsOnlyItsOwnRowsSoAnotherPartitionsPoisonedRowNeverReachesIt() throws Exception {
    sql("DROP PUBLICATION IF EXISTS pub", "DROP TABLE IF EXISTS t",
        "CREATE TABLE t (id int PRIMARY KEY, doc jsonb)", "CREATE PUBLICATION pub FOR TABLE t");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    PartitionSpec p0 = new PartitionSpec(0, 2);
    PartitionSpec p1 = new PartitionSpec(1, 2);
    int poisoned = 1;
    while (!p1.receives(key(poisoned))) {
      poisoned++;
    }
    try (FeedCursor<Map<String, Object>> c0 = feed.open(p0, StartPoint.latest());
        FeedCursor<Map<String, Object>> c1 = feed.open(p1, StartPoint.latest())) {
      List<String> writes = new ArrayList<>();
      int p0Rows = 0;
      for (int id = 1; id <= 20; id++) {
        writes.add("INSERT INTO t VALUES (" + id + ", " + (id == poisoned ? POISON : "'{}'") + ")");
        p0Rows += p0.receives(key(id)) ? 1 : 0;
      }
      sql(writes.toArray(String[]::new));
      List<ChangeEvent<Map<String, Object>>> mine = read(c0, p0Rows);
      assertThat(mine).allSatisfy(e -> assertThat(e.raw()).isNotInstanceOf(UndecodableChange.class));
      List<ChangeEvent<Map<String, Object>>> theirs = read(c1, 20 - p0Rows);
      assertThat(theirs).filteredOn(e -> e.raw() instanceof UndecodableChange)
          .extracting(ChangeEvent::key).containsExactly(key(poisoned));
    }
  }

  @Test
  void aSnapshotRowThatCannotBeConvertedIsAnUndecodableChangeOfItsKeyAndTheSnapshotGoesOn() throws Exception {
    sql("DROP PUBLICATION IF EXISTS pub", "DROP TABLE IF EXISTS t",
        "CREATE TABLE t (id int PRIMARY KEY, doc jsonb)", "CREATE PUBLICATION pub FOR TABLE t",
        "INSERT INTO t VALUES (1, '{}'), (2, " + POISON + "), (3, '{}')");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.snapshot())) {
      sql("INSERT INTO t VALUES (4, '{}')");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 4);
      assertThat(events).extracting(ChangeEvent::key).containsExactly(key(1), key(2), key(3), key(4));
      assertThat(events).filteredOn(e -> e.raw() instanceof UndecodableChange).extracting(ChangeEvent::key)
          .containsExactly(key(2));
      assertThat(((UndecodableChange) events.get(1).raw()).reason()).contains("public.t").contains("column doc")
          .contains("type jsonb").contains("{\"n\": 1000");
      assertThat(events.get(3).document()).containsEntry("id", 4);
    }
  }

  /** Row {@code id}'s key: its table and its primary key (ADR 0093). */
  private static String key(int id) {
    return "public.t[\"" + id + "\"]";
  }
}
