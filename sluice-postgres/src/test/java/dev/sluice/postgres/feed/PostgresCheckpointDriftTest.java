package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
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
import org.postgresql.replication.LogSequenceNumber;

/**
 * ADR 0063, proved where the count of a checkpoint inside a transaction could drift: the
 * publication altered (a table added, one dropped) or its row filter changed between the checkpoint
 * and the resume. pgoutput decodes each transaction with the catalog as it was when the
 * transaction ran (a historic snapshot), publication membership and row filters included, so the
 * replayed transaction has the same changes and the count names the same change; the alteration
 * applies from the transactions after it. A checkpoint that does not fit its transaction (edited,
 * or from elsewhere) is refused naming the transaction, never followed.
 */
class PostgresCheckpointDriftTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(300);

  private final String db = PG.createDatabase("drift" + DATABASES.incrementAndGet());

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

  private static List<String> keys(List<ChangeEvent<Map<String, Object>>> events) {
    return events.stream().map(ChangeEvent::key).toList();
  }

  private static String key(String table, int id) {
    return "public." + table + "[\"" + id + "\"]";
  }

  @Test
  void aTableAddedToAndOneDroppedFromThePublicationAfterACheckpointInsideATransactionChangeNothingBeforeThem()
      throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE TABLE public.a (id int PRIMARY KEY)",
        "CREATE TABLE public.c (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t, public.a");
    // The whole publication: a replay that counted or delivered other tables' rows would show.
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .build();
    Position checkpoint;
    List<ChangeEvent<Map<String, Object>>> first;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      // With c in the publication and a out, the third published row of this transaction would be
      // t.2, not t.1: a count read against the altered publication would skip a change.
      sql("BEGIN; INSERT INTO a VALUES (1); INSERT INTO a VALUES (2); INSERT INTO t VALUES (1);"
              + " INSERT INTO c VALUES (1); INSERT INTO a VALUES (3); INSERT INTO t VALUES (2); COMMIT",
          "BEGIN; INSERT INTO a VALUES (4); INSERT INTO c VALUES (2); INSERT INTO t VALUES (3); COMMIT");
      first = read(c, 7);
      assertThat(keys(first)).containsExactly(key("a", 1), key("a", 2), key("t", 1), key("a", 3), key("t", 2),
          key("a", 4), key("t", 3));
      checkpoint = first.get(2).position();
      assertThat(checkpoint.token()).as("inside the first transaction, after its third change").contains("rows=3");
    }
    sql("ALTER PUBLICATION pub ADD TABLE public.c", "ALTER PUBLICATION pub DROP TABLE public.a",
        "BEGIN; INSERT INTO a VALUES (5); INSERT INTO c VALUES (3); INSERT INTO t VALUES (4); COMMIT");
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      List<ChangeEvent<Map<String, Object>>> rest = read(c, 6);
      assertThat(keys(rest)).as("the rest as it was, then the altered publication's")
          .containsExactly(key("a", 3), key("t", 2), key("a", 4), key("t", 3), key("c", 3), key("t", 4));
      assertThat(rest.subList(0, 4)).extracting(ChangeEvent::id)
          .containsExactlyElementsOf(first.subList(3, 7).stream().map(ChangeEvent::id).toList());
      assertThat(c.poll(WAIT)).isEmpty();
    }
  }

  @Test
  void aRowFilterChangedAfterACheckpointInsideATransactionChangesNothingBeforeIt() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t WHERE (id % 2 = 0)");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    Position checkpoint;
    List<ChangeEvent<Map<String, Object>>> first;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t SELECT g FROM generate_series(1, 10) g");
      first = read(c, 5);
      assertThat(keys(first)).containsExactly(key("t", 2), key("t", 4), key("t", 6), key("t", 8), key("t", 10));
      checkpoint = first.get(1).position();
      assertThat(checkpoint.token()).contains("rows=2");
    }
    // Under the new filter the transaction would be 3, 6, 9: two changes skipped would leave 9 alone.
    sql("ALTER PUBLICATION pub SET TABLE public.t WHERE (id % 3 = 0)",
        "INSERT INTO t SELECT g FROM generate_series(11, 15) g");
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      List<ChangeEvent<Map<String, Object>>> rest = read(c, 5);
      assertThat(keys(rest)).as("the rest under the filter it was written under, then the new filter's")
          .containsExactly(key("t", 6), key("t", 8), key("t", 10), key("t", 12), key("t", 15));
      assertThat(rest.subList(0, 3)).extracting(ChangeEvent::id)
          .containsExactlyElementsOf(first.subList(2, 5).stream().map(ChangeEvent::id).toList());
      assertThat(c.poll(WAIT)).isEmpty();
    }
  }

  @Test
  void aCheckpointThatDoesNotFitItsTransactionIsRefusedNamingTheTransaction() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE PUBLICATION pub FOR TABLE public.t");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    PgPosition inside;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t SELECT g FROM generate_series(1, 3) g", "INSERT INTO t VALUES (4)");
      inside = PgPosition.parse(read(c, 4).get(0).position());
    }
    String boundary = LogSequenceNumber.valueOf(inside.lsn()).asString();
    Position tooMany = new PgPosition(inside.lsn(), inside.xid(), 7).toPosition(null);
    Position otherTransaction = new PgPosition(inside.lsn(), inside.xid() + 1000, 1).toPosition(null);
    Position halfOfNoRow = new PgPosition(inside.lsn(), inside.xid(), 3, null, List.of(), java.util.Set.of(), 1, 0)
        .toPosition(null);
    for (Position p : List.of(tooMany, otherTransaction, halfOfNoRow)) {
      try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(p))) {
        assertThatThrownBy(() -> read(c, 1)).as("resuming at %s", p).isInstanceOf(FeedException.class)
            .hasMessageContaining("transaction " + PgPosition.parse(p).xid())
            .hasMessageContaining(boundary)
            .hasMessageContaining("no longer names the same change")
            .satisfies(e -> assertThat(((FeedException) e).retryable()).isFalse());
        assertThatThrownBy(() -> c.poll(WAIT)).as("and stays refused").isInstanceOf(FeedException.class);
      }
    }
  }
}
