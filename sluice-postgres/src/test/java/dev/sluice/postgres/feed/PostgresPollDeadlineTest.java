package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
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
 * Issue 33 defect 2: a poll honours its deadline whatever arrives. While a large transaction of
 * another table streams in, a partition with nothing of its own still returns from {@code poll}
 * (so its heartbeats, lease checks and checkpoints go on), and the position it reports then, in the
 * middle of that transaction, resumes exactly.
 */
class PostgresPollDeadlineTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(300);
  private static final int HALF = 10_000;

  private final String db = PG.createDatabase("deadline" + DATABASES.incrementAndGet());

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private void sql(String... statements) throws SQLException {
    FeedTestSupport.sql(db, statements);
  }

  private static List<Object> ids(List<ChangeEvent<Map<String, Object>>> events) {
    return events.stream().map(e -> e.documentKey().get("id")).toList();
  }

  @Test
  void aPollWithNoTimeLeftReadsAtMostOneMessageOfABacklogOfOtherTablesAndItsPositionResumesExactly()
      throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY)", "CREATE TABLE public.other (id int PRIMARY KEY)",
        "CREATE PUBLICATION pub FOR TABLE public.t, public.other");
    PostgresChangeFeed feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
    Position start;
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      start = c.position();
    }
    // The whole backlog is committed before the cursor opens: it streams in as fast as the server
    // sends it, all of it of another table except one row in its middle and one after it.
    sql("BEGIN; INSERT INTO other SELECT g FROM generate_series(1, " + HALF + ") g; INSERT INTO t VALUES (1);"
            + " INSERT INTO other SELECT g FROM generate_series(" + (HALF + 1) + ", " + 2 * HALF + ") g; COMMIT",
        "INSERT INTO t VALUES (2)");

    List<ChangeEvent<Map<String, Object>>> all = new ArrayList<>();
    List<Position> emptyHandedInside = new ArrayList<>();
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(start))) {
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      while (all.size() < 2 && System.nanoTime() < deadline) {
        PgPosition before = PgPosition.parse(c.position());
        List<ChangeEvent<Map<String, Object>>> batch = c.poll(Duration.ZERO);
        PgPosition after = PgPosition.parse(c.position());
        long read = after.rows() - (before.xid() == after.xid() ? before.rows() : 0);
        assertThat(read).as("rows read by one poll with no time left (%s -> %s)", before, after)
            .isLessThanOrEqualTo(1);
        if (batch.isEmpty() && after.inside()) {
          emptyHandedInside.add(c.position());
        }
        all.addAll(batch);
      }
    }
    assertThat(ids(all)).containsExactly(1, 2);
    assertThat(emptyHandedInside.stream().map(p -> PgPosition.parse(p).rows()).distinct().count())
        .as("a poll returned empty-handed after each row of the other table").isGreaterThanOrEqualTo(2 * HALF);

    // Resuming at what those polls reported delivers exactly the rest.
    Position beforeRowOne = reportedAt(emptyHandedInside, HALF / 2);
    Position afterRowOne = reportedAt(emptyHandedInside, HALF + 1 + HALF / 2);
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(beforeRowOne))) {
      List<ChangeEvent<Map<String, Object>>> rest = read(c, 2);
      assertThat(rest).extracting(ChangeEvent::id).containsExactlyElementsOf(all.stream().map(ChangeEvent::id).toList());
    }
    try (FeedCursor<Map<String, Object>> c = feed.open(PartitionSpec.single(), StartPoint.after(afterRowOne))) {
      List<ChangeEvent<Map<String, Object>>> rest = read(c, 1);
      assertThat(rest).extracting(ChangeEvent::id).containsExactly(all.get(1).id());
      assertThat(c.poll(WAIT)).as("nothing more").isEmpty();
    }
  }

  /** The first of {@code positions} after {@code rows} rows of the transaction. */
  private static Position reportedAt(List<Position> positions, long rows) {
    return positions.stream().filter(p -> PgPosition.parse(p).rows() == rows).findFirst().orElseThrow();
  }

  /** Reads until {@code count} changes arrived (or fails after 60 s). */
  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    return FeedTestSupport.read(c, count, WAIT);
  }
}
