package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Issue 13 item 3 on a real PostgreSQL 17: the snapshot bootstrap reads the existing rows of every
 * published table in one snapshot consistent with the slot's start, then streams what committed
 * after it; a restart in the middle of the snapshot (its exported snapshot dies with the session)
 * continues after the checkpoint in a new snapshot and leaves out the changes that snapshot holds.
 *
 * <p>Every write stamps its row with a new value of one sequence ({@code version}), so a row's
 * versions, in delivery order, must strictly increase: a change delivered twice, or an older state
 * delivered after a newer one, breaks that. And applying the changes in order must give exactly the
 * tables' final contents: nothing missed.
 */
class PostgresSnapshotTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(200);

  @org.junit.jupiter.api.AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private final String db = PG.createDatabase("snap" + DATABASES.incrementAndGet());

  private void sql(String... statements) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private void createTables(int rows, int notes) throws SQLException {
    sql("CREATE SEQUENCE v",
        "CREATE TABLE public.t (id int PRIMARY KEY, version bigint NOT NULL, pad text)",
        // Mixed-case text keys: their order is the database collation's, which only the server knows.
        "CREATE TABLE public.notes (code text PRIMARY KEY, version bigint NOT NULL)",
        "CREATE PUBLICATION pub FOR TABLE public.t, public.notes",
        "INSERT INTO t SELECT g, nextval('v'), repeat('x', 50) FROM generate_series(1, " + rows + ") g",
        "INSERT INTO notes SELECT CASE WHEN g % 2 = 0 THEN 'N' ELSE 'n' END || g, nextval('v')"
            + " FROM generate_series(1, " + notes + ") g");
  }

  private PostgresChangeFeed feed() {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub").batchSize(100)
        .build();
  }

  /** Writes that touch rows everywhere in the key order: updates, deletes, re-inserts, new rows. */
  private void churn(int round) throws SQLException {
    sql("UPDATE t SET version = nextval('v') WHERE id % 7 = " + round % 7,
        "DELETE FROM t WHERE id % 11 = " + round % 11,
        "INSERT INTO t SELECT g, nextval('v'), 'again' FROM generate_series(1, 1000) g WHERE g % 11 = "
            + (round + 5) % 11 + " ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        "INSERT INTO t VALUES (" + (5000 + round) + ", nextval('v'), 'new')",
        "UPDATE notes SET version = nextval('v') WHERE length(code) % 3 = " + round % 3,
        "BEGIN; UPDATE t SET version = nextval('v') WHERE id IN (3, 500, 990); DELETE FROM notes WHERE code = 'n"
            + (2 * round + 1) + "'; COMMIT");
  }

  /** Applies changes in delivery order, checking each row's versions strictly increase. */
  private static final class Replica {
    final Map<String, Long> rows = new HashMap<>();
    final Map<String, Long> lastVersion = new HashMap<>();
    final Set<String> snapshotted = new HashSet<>();
    int snapshotEvents;
    /**
     * After a TRUNCATE or a key move in the window a row may come again, or an older state after a
     * newer one and then the newer again: only the final state is checked.
     */
    boolean allowRepeats;

    void apply(List<ChangeEvent<Map<String, Object>>> events) {
      for (ChangeEvent<Map<String, Object>> e : events) {
        @SuppressWarnings("unchecked")
        Map<String, Object> raw = (Map<String, Object>) e.raw();
        if (raw.containsKey("truncate")) {
          String prefix = raw.get("truncate") + "["; // keys are qualified by their table (ADR 0093)
          rows.keySet().removeIf(k -> k.startsWith(prefix));
          continue;
        }
        String table = (String) raw.get("table");
        String id = e.key();
        if (raw.get("oldKey") instanceof Map<?, ?> oldKey && oldKey.size() == 1) {
          String was = PgRowDecoder.key(table, List.of(String.valueOf(oldKey.values().iterator().next())));
          if (!was.equals(id)) {
            rows.remove(was); // the update moved the row's key
          }
        }
        if (e.operation() == Operation.SNAPSHOT) {
          snapshotEvents++;
          assertThat(snapshotted.add(id)).as("%s read once in the snapshot", id).isTrue();
        }
        if (e.operation() == Operation.DELETE) {
          rows.remove(id);
          continue;
        }
        long version = ((Number) e.document().get("version")).longValue();
        Long before = lastVersion.put(id, version);
        assertThat(allowRepeats || before == null || version > before)
            .as("%s: version %s delivered after %s (%s at %s)", id, version, before, e.operation(), e.position())
            .isTrue();
        rows.put(id, version);
      }
    }
  }

  private Map<String, Long> tables() throws SQLException {
    Map<String, Long> out = new HashMap<>();
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      try (ResultSet rs = s.executeQuery("SELECT id, version FROM t")) {
        while (rs.next()) {
          out.put(PgRowDecoder.key("public.t", List.of(rs.getString(1))), rs.getLong(2));
        }
      }
      try (ResultSet rs = s.executeQuery("SELECT code, version FROM notes")) {
        while (rs.next()) {
          out.put(PgRowDecoder.key("public.notes", List.of(rs.getString(1))), rs.getLong(2));
        }
      }
    }
    return out;
  }

  /** Reads until the replica equals the tables (or fails after 60 s). */
  private void catchUp(FeedCursor<Map<String, Object>> c, Replica replica) throws SQLException {
    Map<String, Long> expected = tables();
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!replica.rows.equals(expected) && System.nanoTime() < deadline) {
      replica.apply(c.poll(WAIT));
    }
    assertThat(replica.rows).as("the replica built from the changes").isEqualTo(expected);
  }

  /** Reads {@code chunks} polls and returns the position of the last change read. */
  private static Position read(FeedCursor<Map<String, Object>> c, Replica replica, int chunks) {
    Position last = null;
    for (int i = 0; i < chunks; i++) {
      List<ChangeEvent<Map<String, Object>>> events = c.poll(WAIT);
      assertThat(events).as("chunk %d", i).isNotEmpty();
      replica.apply(events);
      last = events.get(events.size() - 1).position();
    }
    return last;
  }

  @Test
  void theSnapshotHoldsEveryExistingRowOnceAndTheStreamEveryLaterChangeWithNothingTwice() throws Exception {
    createTables(1000, 150);
    Replica replica = new Replica();
    try (FeedCursor<Map<String, Object>> c = feed().open(PartitionSpec.single(), StartPoint.snapshot())) {
      assertThat(c.position().token()).contains("\"snapshot\"");
      churn(1); // committed after the slot's start: in the stream, not in the snapshot
      read(c, replica, 3);
      churn(2);
      catchUp(c, replica);
      assertThat(replica.snapshotEvents).as("every row that existed at the start, once").isEqualTo(1150);
      churn(3);
      catchUp(c, replica);
      assertThat(c.position().token()).as("the snapshot is over").doesNotContain("{");
    }
  }

  @Test
  void restartsInTheMiddleOfTheSnapshotContinueAfterTheCheckpointWithoutGapsOrRepeats() throws Exception {
    createTables(1000, 150);
    PostgresChangeFeed feed = feed();
    Replica replica = new Replica();
    Position checkpoint;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.snapshot())) {
      churn(1);
      checkpoint = read(c, replica, 1); // inside notes: the first table in name order
    }
    assertThat(checkpoint.token()).contains("public.notes");
    churn(2); // while no one reads: before the next snapshot, for both sides of the checkpoint
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      churn(3);
      checkpoint = read(c, replica, 4); // the rest of notes, then into t
    }
    assertThat(checkpoint.token()).contains("public.t").contains("\"cover\"");
    churn(4);
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      assertThat(c.position().token()).as("two ranges read in later snapshots").containsPattern("cover.*lsn.*lsn");
      churn(5);
      catchUp(c, replica);
      churn(6);
      catchUp(c, replica);
      assertThat(c.position().token()).as("past the last covering snapshot").doesNotContain("{");
    }
    assertThat(replica.snapshotted).as("the third snapshot read the rows after the second checkpoint")
        .contains("public.t[\"999\"]", "public.t[\"301\"]")
        .as("every note was read in the first two").filteredOn(k -> k.startsWith("public.notes[")).hasSizeGreaterThan(140);
  }

  @Test
  void aCheckpointTakenInTheStreamAfterARestartStillLeavesOutWhatTheLaterSnapshotHolds() throws Exception {
    createTables(300, 10);
    PostgresChangeFeed feed = feed();
    Replica replica = new Replica();
    Position checkpoint;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.snapshot())) {
      checkpoint = read(c, replica, 2);
    }
    churn(1);
    // The rest of the snapshot and the first streamed transactions, then a restart in the stream.
    List<ChangeEvent<Map<String, Object>>> streamed = new ArrayList<>();
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      churn(2);
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      while (streamed.isEmpty() && System.nanoTime() < deadline) {
        for (ChangeEvent<Map<String, Object>> e : c.poll(WAIT)) {
          if (e.operation() == Operation.SNAPSHOT || streamed.isEmpty()) {
            replica.apply(List.of(e));
            if (e.operation() != Operation.SNAPSHOT) {
              streamed.add(e);
            }
          }
        }
      }
    }
    assertThat(streamed).isNotEmpty();
    checkpoint = streamed.get(0).position();
    assertThat(checkpoint.token()).as("the covers travel with stream positions").contains("\"cover\"");
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      catchUp(c, replica);
    }
  }

  /**
   * In the window between the crashed snapshot and the one that resumes it, the covered table is
   * truncated and filled again: the replica still ends equal to the table (rows may come twice,
   * never go missing).
   */
  @Test
  void aTruncateBetweenACrashAndTheResumedSnapshotLosesNoRow() throws Exception {
    crashInTheSnapshotThenResumeAfter(
        "TRUNCATE t",
        "INSERT INTO t SELECT g, nextval('v'), 'again' FROM generate_series(1, 400) g");
  }

  /**
   * In the window, an update moves two rows' keys from the range read before the crash to the range
   * read after, and one of them changes again: that later snapshot holds the newest state, the
   * delivered move an older one, so the row's later change must come too. The replica ends equal to
   * the table: no old key left behind, no row left stale.
   */
  @Test
  void aKeyMovedIntoTheResumedRangeBetweenACrashAndTheResumedSnapshotIsNotLeftStale() throws Exception {
    crashInTheSnapshotThenResumeAfter(
        "UPDATE t SET id = id + 10000, version = nextval('v') WHERE id IN (5, 6)",
        "UPDATE t SET version = nextval('v') WHERE id = 10005");
  }

  private void crashInTheSnapshotThenResumeAfter(String... window) throws Exception {
    createTables(300, 10);
    PostgresChangeFeed feed = feed();
    Replica replica = new Replica();
    replica.allowRepeats = true;
    Position checkpoint;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.snapshot())) {
      checkpoint = read(c, replica, 2); // notes, then t up to 100
    }
    assertThat(checkpoint.token()).contains("public.t");
    sql(window);
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      catchUp(c, replica);
      sql("INSERT INTO t VALUES (20000, nextval('v'), 'after')", "DELETE FROM t WHERE id = 7",
          "UPDATE t SET version = nextval('v') WHERE id = 10006");
      catchUp(c, replica);
    }
  }

  @Test
  void twoPartitionsEachSnapshotTheirOwnKeys() throws Exception {
    createTables(400, 0);
    PostgresChangeFeed feed = feed().forGroup("g");
    Set<String> a = new HashSet<>();
    Set<String> b = new HashSet<>();
    try (FeedCursor<Map<String, Object>> ca = feed.open(new PartitionSpec(0, 2), StartPoint.snapshot());
        FeedCursor<Map<String, Object>> cb = feed.open(new PartitionSpec(1, 2), StartPoint.snapshot())) {
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      while (a.size() + b.size() < 400 && System.nanoTime() < deadline) {
        ca.poll(WAIT).forEach(e -> assertThat(a.add(e.key())).isTrue());
        cb.poll(WAIT).forEach(e -> assertThat(b.add(e.key())).isTrue());
      }
    }
    assertThat(a).isNotEmpty().doesNotContainAnyElementsOf(b);
    assertThat(a.size() + b.size()).isEqualTo(400);
  }

  @Test
  void aTableASnapshotCannotReadExactlyIsRefusedByName() throws Exception {
    sql("CREATE TABLE public.nokey (v int)", "CREATE TABLE public.nothing (id int PRIMARY KEY)",
        "ALTER TABLE public.nothing REPLICA IDENTITY NOTHING",
        "CREATE PUBLICATION pub FOR TABLE public.nokey, public.nothing");
    PostgresChangeFeed nokey = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.nokey").build();
    assertThatThrownBy(() -> nokey.open(PartitionSpec.single(), StartPoint.snapshot()))
        .isInstanceOf(FeedException.class).hasMessageContaining("public.nokey has no primary key");
    PostgresChangeFeed nothing = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.nothing").build();
    assertThatThrownBy(() -> nothing.open(PartitionSpec.single(), StartPoint.snapshot()))
        .isInstanceOf(FeedException.class).hasMessageContaining("replica identity NOTHING");
    PostgresChangeFeed missing = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.absent").build();
    assertThatThrownBy(() -> missing.open(PartitionSpec.single(), StartPoint.snapshot()))
        .isInstanceOf(FeedException.class).hasMessageContaining("does not publish public.absent");
  }
}
