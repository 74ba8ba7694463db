package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 13 item 1 on a real PostgreSQL 17 (fsync and synchronous_commit on): pgoutput decoded into
 * changes with the common types mapped faithfully, positions that resume exactly at every change
 * (inside a transaction too), the slot confirmed only when acknowledged, partitions that split a
 * table's keys, and a checkpoint whose slot is gone reported as lost history.
 */
class PostgresChangeFeedTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(300);

  @org.junit.jupiter.api.AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private final String db = PG.createDatabase("feed" + DATABASES.incrementAndGet());

  private void sql(String... statements) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private PostgresChangeFeed feed(String table) {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table(table).build();
  }

  /** Reads until {@code count} changes arrived (or fails after 30 s). */
  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    List<ChangeEvent<Map<String, Object>>> out = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (out.size() < count && System.nanoTime() < deadline) {
      out.addAll(c.poll(WAIT));
    }
    assertThat(out).as("changes read").hasSize(count);
    return out;
  }

  @Test
  @SuppressWarnings("unchecked")
  void insertsUpdatesDeletesAndTruncatesArriveWithTheirTypesMappedFaithfully() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY, amount numeric(30,10), at timestamptz, local timestamp,"
            + " day date, doc jsonb, tags text[], nums int[], uid uuid, raw bytea, flag boolean, big bigint,"
            + " ratio double precision, note text, span interval)",
        "CREATE PUBLICATION pub FOR TABLE public.t");
    try (FeedCursor<Map<String, Object>> c = feed("public.t").open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t VALUES (1, 12345678901234567890.0123456789, '2026-11-25 10:15:30.123456+02',"
              + " '2026-11-25 10:15:30', '2026-11-25', '{\"a\": [1, 2], \"b\": null}', '{x,\"y z\",NULL}',"
              + " '{1,2,3}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x0aff', true, 9007199254740993,"
              + " 'NaN', 'hello', '1 day 2 hours')",
          "UPDATE t SET note = 'changed' WHERE id = 1",
          "DELETE FROM t WHERE id = 1",
          "TRUNCATE t");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 4);
      assertThat(events).extracting(ChangeEvent::operation)
          .containsExactly(Operation.INSERT, Operation.UPDATE, Operation.DELETE, Operation.OTHER);

      ChangeEvent<Map<String, Object>> insert = events.get(0);
      assertThat(insert.key()).as("qualified by its table (ADR 0093)").isEqualTo("public.t[\"1\"]");
      assertThat(insert.documentKey()).isEqualTo(Map.of("id", 1));
      Map<String, Object> row = insert.document();
      assertThat(row.get("amount")).isEqualTo(new BigDecimal("12345678901234567890.0123456789"));
      assertThat(((OffsetDateTime) row.get("at")).toInstant())
          .isEqualTo(OffsetDateTime.of(2026, 11, 25, 8, 15, 30, 123_456_000, ZoneOffset.UTC).toInstant());
      assertThat(row.get("local")).isEqualTo(LocalDateTime.of(2026, 11, 25, 10, 15, 30));
      assertThat(row.get("day")).isEqualTo(LocalDate.of(2026, 11, 25));
      assertThat(((JsonNode) row.get("doc")).get("a").get(1).asInt()).isEqualTo(2);
      assertThat((List<Object>) row.get("tags")).containsExactly("x", "y z", null);
      assertThat((List<Object>) row.get("nums")).containsExactly(1, 2, 3);
      assertThat(row.get("uid")).isEqualTo(UUID.fromString("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"));
      assertThat((byte[]) row.get("raw")).containsExactly(0x0a, 0xff);
      assertThat(row.get("flag")).isEqualTo(true);
      assertThat(row.get("big")).isEqualTo(9007199254740993L);
      assertThat((Double) row.get("ratio")).isNaN();
      assertThat(row.get("span")).as("an unmapped type stays the server's text").isEqualTo("1 day 02:00:00");
      assertThat(insert.time()).isNotNull();

      assertThat(events.get(1).document()).containsEntry("note", "changed");
      assertThat(events.get(2).document()).isNull();
      assertThat(events.get(2).documentKey()).isEqualTo(Map.of("id", 1));
      assertThat(events.get(3).key()).as("a truncate concerns every partition").isEmpty();
      assertThat(events).extracting(ChangeEvent::id).doesNotHaveDuplicates();
    }
  }

  @Test
  void withReplicaIdentityFullUpdatesAndDeletesCarryTheWholeRowBeforeThem() throws Exception {
    sql("CREATE TABLE public.full_rows (id int PRIMARY KEY, note text)", "ALTER TABLE full_rows REPLICA IDENTITY FULL",
        "CREATE TABLE public.key_rows (id int PRIMARY KEY, note text)",
        "CREATE PUBLICATION pub FOR TABLE public.full_rows, public.key_rows");
    try (FeedCursor<Map<String, Object>> c = feed("public.full_rows").open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO full_rows VALUES (1, 'a')", "UPDATE full_rows SET note = 'b' WHERE id = 1",
          "DELETE FROM full_rows WHERE id = 1");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 3);
      assertThat(events).extracting(ChangeEvent::before)
          .containsExactly(null, Map.of("id", 1, "note", "a"), Map.of("id", 1, "note", "b"));
    }
    try (FeedCursor<Map<String, Object>> c = feed("public.key_rows").open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO key_rows VALUES (1, 'a')", "DELETE FROM key_rows WHERE id = 1");
      assertThat(read(c, 2)).extracting(ChangeEvent::before).as("only the key is known before: no pre-image")
          .containsOnlyNulls();
    }
  }

  @Test
  void resumingAtEveryPositionInsideAndBetweenTransactionsDeliversExactlyTheRest() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY, v text)", "CREATE TABLE public.other (id int PRIMARY KEY)",
        "CREATE PUBLICATION pub FOR TABLE public.t, public.other");
    PostgresChangeFeed feed = feed("public.t");
    List<ChangeEvent<Map<String, Object>>> all;
    Position start;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      start = c.position();
      sql("BEGIN; INSERT INTO t VALUES (1, 'a'); INSERT INTO other VALUES (1); INSERT INTO t VALUES (2, 'b');"
              + " UPDATE t SET v = 'c' WHERE id = 1; COMMIT",
          "INSERT INTO t VALUES (3, 'd')",
          "BEGIN; DELETE FROM t WHERE id = 2; INSERT INTO other VALUES (2); INSERT INTO t VALUES (4, 'e'); COMMIT");
      all = read(c, 6);
    }
    assertThat(all).extracting(e -> e.operation() + ":" + e.documentKey().get("id"))
        .containsExactly("INSERT:1", "INSERT:2", "UPDATE:1", "INSERT:3", "DELETE:2", "INSERT:4");
    assertThat(all.get(0).position().token()).as("inside the first transaction").contains("xid=");

    List<Position> positions = new ArrayList<>();
    positions.add(start);
    all.forEach(e -> positions.add(e.position()));
    for (int i = 0; i < positions.size(); i++) {
      try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(positions.get(i)))) {
        List<ChangeEvent<Map<String, Object>>> rest = read(c, all.size() - i);
        assertThat(rest).as("resumed after position %d (%s)", i, positions.get(i))
            .extracting(ChangeEvent::id).containsExactlyElementsOf(all.subList(i, all.size()).stream()
                .map(ChangeEvent::id).toList());
        assertThat(c.poll(WAIT)).as("nothing more after position %d", i).isEmpty();
      }
    }
  }

  @Test
  void theSlotConfirmsOnlyWhatIsAcknowledged() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t");
    PostgresChangeFeed feed = feed("public.t");
    String slot = feed.slotName(PartitionSpec.single());
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      String created = confirmed(slot);
      sql("INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (2)");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 2);
      assertThat(confirmed(slot)).as("read but not acknowledged").isEqualTo(created);
      c.acknowledge(events.get(0).position());
      String afterFirst = org.postgresql.replication.LogSequenceNumber.valueOf(
          PgPosition.parse(events.get(0).position()).lsn()).asString();
      org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> confirmed(slot).equals(afterFirst));
    }
    // A feed whose cursors are all closed keeps no thread.
    org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> Thread.getAllStackTraces().keySet()
        .stream().noneMatch(t -> t.getName().equals("sluice-pg-keepalive-" + feed.stream())));
  }

  private String confirmed(String slot) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
      rs.next();
      return rs.getString(1);
    }
  }

  @Test
  void twoPartitionsSplitTheKeysBetweenThemAndEachReadsThroughItsOwnSlot() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t");
    PostgresChangeFeed feed = feed("public.t");
    try (FeedCursor<Map<String, Object>> a = feed.open(new PartitionSpec(0, 2), StartPoint.latest());
        FeedCursor<Map<String, Object>> b = feed.open(new PartitionSpec(1, 2), StartPoint.latest())) {
      for (int i = 0; i < 40; i++) {
        sql("INSERT INTO t VALUES (" + i + ")");
      }
      Set<String> seenA = new HashSet<>();
      Set<String> seenB = new HashSet<>();
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (seenA.size() + seenB.size() < 40 && System.nanoTime() < deadline) {
        a.poll(WAIT).forEach(e -> seenA.add(e.key()));
        b.poll(WAIT).forEach(e -> seenB.add(e.key()));
      }
      assertThat(seenA).isNotEmpty().doesNotContainAnyElementsOf(seenB);
      Set<String> union = new HashSet<>(seenA);
      union.addAll(seenB);
      assertThat(union).hasSize(40);
    }
    assertThat(feed.slotName(new PartitionSpec(0, 2))).isNotEqualTo(feed.slotName(new PartitionSpec(1, 2)));
  }

  @Test
  void aCheckpointWhoseSlotIsGoneIsLostHistoryAndABadCheckpointIsNamed() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t");
    PostgresChangeFeed feed = feed("public.t");
    Position checkpoint;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t VALUES (1)");
      checkpoint = read(c, 1).get(0).position();
    }
    sql("SELECT pg_drop_replication_slot('" + feed.slotName(PartitionSpec.single()) + "')");
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.after(checkpoint)))
        .isInstanceOf(HistoryLostException.class).hasMessageContaining("does not exist")
        .hasMessageContaining("history lost");
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.after(Position.of("{\"_data\": \"82AB\"}"))))
        .isInstanceOf(FeedException.class).hasMessageContaining("is not a PostgreSQL feed position");
  }

  /**
   * Issue 33 item 2: with {@code failover(true)} the slots are created as failover slots
   * (pg_replication_slots.failover), whether the partition starts on the stream or with a snapshot
   * (whose slot pgjdbc creates without the option, then ALTER_REPLICATION_SLOT sets it); without
   * it, as before, they are not.
   */
  @Test
  void failoverSlotsAreCreatedAsFailoverSlotsWhenAsked() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t",
        "INSERT INTO t VALUES (1)");
    PostgresChangeFeed plain = feed("public.t").forGroup("plain");
    PostgresChangeFeed streamed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").failover(true).build().forGroup("streamed");
    PostgresChangeFeed snapshotted = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null,
        "pub").table("public.t").failover(true).build().forGroup("snapshotted");
    try (FeedCursor<Map<String, Object>> a = plain.open(PartitionSpec.single(), StartPoint.latest());
        FeedCursor<Map<String, Object>> b = streamed.open(PartitionSpec.single(), StartPoint.oldest());
        FeedCursor<Map<String, Object>> c = snapshotted.open(PartitionSpec.single(), StartPoint.snapshot())) {
      assertThat(read(c, 1).get(0).documentKey()).containsEntry("id", 1);
      assertThat(failover(plain.slotName(PartitionSpec.single()))).isFalse();
      assertThat(failover(streamed.slotName(PartitionSpec.single()))).isTrue();
      assertThat(failover(snapshotted.slotName(PartitionSpec.single()))).isTrue();
    }
  }

  private boolean failover(String slot) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection();
        java.sql.PreparedStatement s = c.prepareStatement("SELECT failover FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, slot);
      try (java.sql.ResultSet rs = s.executeQuery()) {
        assertThat(rs.next()).as("slot " + slot + " exists").isTrue();
        return rs.getBoolean(1);
      }
    }
  }
}
