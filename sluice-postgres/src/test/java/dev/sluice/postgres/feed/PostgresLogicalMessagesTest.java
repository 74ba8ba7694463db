package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 item 3 (ADR 0096): logical-decoding messages ({@code pg_logical_emit_message}) as
 * changes of operation MESSAGE, on a real PostgreSQL 17: transactional ones in commit order among
 * their transaction's rows, non-transactional ones when decoded (even from a transaction that rolls
 * back), only the configured prefixes; and a checkpoint after any change of a transaction with
 * rows and messages resumes at exactly the next one, also a checkpoint written by a feed that did
 * not ask for messages.
 */
class PostgresLogicalMessagesTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(300);

  private final String db = PG.createDatabase("messages" + DATABASES.incrementAndGet());

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  /** Runs {@code statements} in one transaction, committed, or rolled back when {@code commit} is false. */
  private void tx(boolean commit, String... statements) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      c.setAutoCommit(false);
      for (String statement : statements) {
        s.execute(statement);
      }
      if (commit) {
        c.commit();
      } else {
        c.rollback();
      }
    }
  }

  private PostgresChangeFeed.Builder builder() {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub").table("public.t");
  }

  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    return FeedTestSupport.read(c, count, WAIT);
  }

  private static String describe(ChangeEvent<Map<String, Object>> e) {
    return e.operation() == Operation.MESSAGE ? "MESSAGE " + e.key() + " " + e.document().get("content")
        + (Boolean.TRUE.equals(e.document().get("transactional")) ? "" : " (non-transactional)")
        : e.operation() + " " + e.documentKey().values().iterator().next();
  }

  @Test
  void messagesComeInCommitOrderFilteredByPrefixAndEveryCheckpointResumesAtTheNextChange() throws Exception {
    tx(true, "CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t");
    PostgresChangeFeed feed = builder().messages("outbox").build();
    PostgresChangeFeed rowsOnly = builder().build();
    List<ChangeEvent<Map<String, Object>>> events;
    Position start;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      start = c.position();
      tx(true, "INSERT INTO t VALUES (1)",
          "SELECT pg_logical_emit_message(true, 'outbox.orders', 'm1')",
          "SELECT pg_logical_emit_message(true, 'other', 'not asked for')",
          "INSERT INTO t VALUES (2)",
          "SELECT pg_logical_emit_message(true, 'outbox.orders', 'm2')",
          "INSERT INTO t VALUES (3)");
      tx(false, "SELECT pg_logical_emit_message(true, 'outbox.orders', 'rolled back')",
          "SELECT pg_logical_emit_message(false, 'outbox.audit', 'kept')",
          "INSERT INTO t VALUES (99)");
      tx(true, "INSERT INTO t VALUES (4)", "SELECT pg_logical_emit_message(true, 'outbox.orders', 'm3')");
      events = read(c, 8);
    }
    assertThat(events).extracting(PostgresLogicalMessagesTest::describe).containsExactly(
        "INSERT 1", "MESSAGE outbox.orders m1", "INSERT 2", "MESSAGE outbox.orders m2", "INSERT 3",
        "MESSAGE outbox.audit kept (non-transactional)", "INSERT 4", "MESSAGE outbox.orders m3");
    ChangeEvent<Map<String, Object>> m1 = events.get(1);
    assertThat(m1.documentKey()).isEqualTo(Map.of("prefix", "outbox.orders"));
    assertThat(m1.document()).containsEntry("prefix", "outbox.orders").containsEntry("content", "m1")
        .containsEntry("transactional", true).containsKey("lsn");
    assertThat(events).extracting(ChangeEvent::id).doesNotHaveDuplicates();

    // Resumed after each change: exactly the changes after it, with the same ids.
    for (int k = 0; k < events.size() - 1; k++) {
      try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(),
          StartPoint.after(events.get(k).position()))) {
        assertThat(read(c, events.size() - 1 - k)).as("resumed after " + describe(events.get(k)) + " at "
            + events.get(k).position().token()).extracting(ChangeEvent::id)
            .containsExactlyElementsOf(events.subList(k + 1, events.size()).stream().map(ChangeEvent::id).toList());
      }
    }

    // A feed that does not ask for messages gets none, and its checkpoint inside the transaction
    // (rows only) is resumed by one that asks at the same change: the messages after it come.
    Position afterFirstRow;
    try (FeedCursor<Map<String, Object>> c = rowsOnly.open(PartitionSpec.single(), StartPoint.after(start))) {
      List<ChangeEvent<Map<String, Object>>> rows = read(c, 4);
      assertThat(rows).extracting(PostgresLogicalMessagesTest::describe)
          .containsExactly("INSERT 1", "INSERT 2", "INSERT 3", "INSERT 4");
      afterFirstRow = rows.get(0).position();
    }
    assertThat(afterFirstRow.token()).doesNotContain("messages=");
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(afterFirstRow))) {
      assertThat(read(c, 7)).extracting(ChangeEvent::id)
          .containsExactlyElementsOf(events.subList(1, events.size()).stream().map(ChangeEvent::id).toList());
    }
  }

  @Test
  void everyPrefixWithTheEmptyOneAndAMessageKeyChoosesItsPartition() throws Exception {
    tx(true, "CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t");
    PostgresChangeFeed feed = builder().messages("").build();
    List<String> seen0 = new ArrayList<>();
    List<String> seen1 = new ArrayList<>();
    try (FeedCursor<Map<String, Object>> a = feed.open(new PartitionSpec(0, 2), StartPoint.latest());
        FeedCursor<Map<String, Object>> b = feed.open(new PartitionSpec(1, 2), StartPoint.latest())) {
      List<String> statements = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        statements.add("SELECT pg_logical_emit_message(true, 'order:" + (i % 5) + "', '" + i + "')");
      }
      statements.add("SELECT pg_logical_emit_message(true, 'binary', '\\xff00'::bytea)");
      tx(true, statements.toArray(String[]::new));
      long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      List<ChangeEvent<Map<String, Object>>> all = new ArrayList<>();
      while (seen0.size() + seen1.size() < 21 && System.nanoTime() < deadline) {
        for (ChangeEvent<Map<String, Object>> e : a.poll(WAIT)) {
          seen0.add(e.key());
          all.add(e);
        }
        for (ChangeEvent<Map<String, Object>> e : b.poll(WAIT)) {
          seen1.add(e.key());
          all.add(e);
        }
      }
      assertThat(seen0.size() + seen1.size()).isEqualTo(21);
      assertThat(seen0).as("a prefix is in one partition").doesNotContainAnyElementsOf(seen1);
      ChangeEvent<Map<String, Object>> binary = all.stream().filter(e -> e.key().equals("binary")).findFirst()
          .orElseThrow();
      assertThat((byte[]) binary.document().get("content")).containsExactly((byte) 0xff, (byte) 0x00);
      // Within a prefix, the order written.
      assertThat(all.stream().filter(e -> e.key().equals("order:3")).map(e -> e.document().get("content")))
          .containsExactly("3", "8", "13", "18");
    }
  }

  /**
   * A feed of messages only ({@code rows(false)}): no row of any table, and a published table
   * without a primary key (which a row feed refuses) does not stop it.
   */
  @Test
  void aFeedOfMessagesOnlyDeliversNoRowsAndNeedsNoTableKey() throws Exception {
    tx(true, "CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE TABLE public.nokey (v int)",
        "CREATE PUBLICATION pub FOR TABLE public.t, public.nokey WITH (publish = 'insert')");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .rows(false).messages("outbox").build();
    assertThat(feed.supports(StartPoint.snapshot())).isFalse();
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      tx(true, "INSERT INTO t VALUES (1)", "INSERT INTO nokey VALUES (2)",
          "SELECT pg_logical_emit_message(true, 'outbox', 'only this')", "INSERT INTO t VALUES (3)");
      tx(true, "SELECT pg_logical_emit_message(true, 'outbox', 'and this')");
      assertThat(read(c, 2)).extracting(PostgresLogicalMessagesTest::describe)
          .containsExactly("MESSAGE outbox only this", "MESSAGE outbox and this");
    }
  }
}
