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
 * Issue 33 defect 4: an update that changes a row's primary key is the end of the old key's row
 * and the start of the new key's. It arrives as a delete of the old key, in the old key's partition,
 * and an insert of the new key, in the new key's, under the default replica identity (pgoutput
 * sends the old key) and under FULL (it sends the old row); and positions stay exact when one row
 * of the transaction is two changes, in one partition or in two.
 */
class PostgresKeyChangeTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(300);

  private final String db = PG.createDatabase("keychange" + DATABASES.incrementAndGet());

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private void sql(String... statements) throws SQLException {
    FeedTestSupport.sql(db, statements);
  }

  private PostgresChangeFeed feed() {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").build();
  }

  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    return FeedTestSupport.read(c, count, WAIT);
  }

  private static String key(int id) {
    return "public.t[\"" + id + "\"]";
  }

  private static String described(ChangeEvent<Map<String, Object>> e) {
    return e.operation() + " " + e.key() + (e.document() == null ? "" : " " + e.document().get("v"));
  }

  @Test
  void aKeyChangeIsADeleteOfTheOldKeyAndAnInsertOfTheNewOne() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY, v text)", "CREATE PUBLICATION pub FOR TABLE public.t");
    try (FeedCursor<Map<String, Object>> c = feed().open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t VALUES (1, 'a')", "UPDATE t SET id = 2, v = 'b' WHERE id = 1",
          "UPDATE t SET v = 'c' WHERE id = 2");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 4);
      assertThat(events).extracting(PostgresKeyChangeTest::described)
          .containsExactly("INSERT " + key(1) + " a", "DELETE " + key(1), "INSERT " + key(2) + " b",
              "UPDATE " + key(2) + " c");
      assertThat(events.get(1).documentKey()).isEqualTo(Map.of("id", 1));
      assertThat(events.get(2).documentKey()).isEqualTo(Map.of("id", 2));
      assertThat(events.get(2).document()).isEqualTo(Map.of("id", 2, "v", "b"));
      assertThat(events.get(2).before()).as("the new key had no row before").isNull();
      assertThat(events).extracting(ChangeEvent::id).doesNotHaveDuplicates();
      assertThat(events.get(1).position().token()).as("between the delete and the insert of one row").endsWith("+1");
    }
  }

  @Test
  void underReplicaIdentityFullTheOldKeysDeleteCarriesTheOldRow() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY, v text)", "ALTER TABLE t REPLICA IDENTITY FULL",
        "CREATE PUBLICATION pub FOR TABLE public.t");
    try (FeedCursor<Map<String, Object>> c = feed().open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO t VALUES (1, 'a')", "UPDATE t SET id = 2 WHERE id = 1", "UPDATE t SET v = 'c' WHERE id = 2");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 4);
      assertThat(events).extracting(PostgresKeyChangeTest::described)
          .containsExactly("INSERT " + key(1) + " a", "DELETE " + key(1), "INSERT " + key(2) + " a",
              "UPDATE " + key(2) + " c");
      assertThat(events.get(1).before()).isEqualTo(Map.of("id", 1, "v", "a"));
      assertThat(events.get(2).before()).isNull();
      assertThat(events.get(3).before()).as("an update keeping its key keeps its pre-image")
          .isEqualTo(Map.of("id", 2, "v", "a"));
    }
  }

  /** Two ids of {@code public.t} whose keys are in different partitions of two, and two in the same one. */
  private static int[] ids(boolean samePartition, int from) {
    for (int a = from; a < from + 100; a++) {
      for (int b = a + 1; b < from + 100; b++) {
        boolean same = PartitionSpec.indexOf(key(a), 2) == PartitionSpec.indexOf(key(b), 2);
        if (same == samePartition) {
          return new int[] {a, b};
        }
      }
    }
    throw new AssertionError("no pair");
  }

  @Test
  void eachHalfGoesToItsKeysPartitionAndEveryPositionResumesExactly() throws Exception {
    sql("CREATE TABLE public.t (id int PRIMARY KEY, v text)", "CREATE TABLE public.other (id int PRIMARY KEY)",
        "CREATE PUBLICATION pub FOR TABLE public.t, public.other");
    int[] apart = ids(false, 1);
    int[] together = ids(true, 101);
    PostgresChangeFeed feed = feed();
    List<Position> starts = new ArrayList<>();
    List<List<ChangeEvent<Map<String, Object>>>> read = new ArrayList<>();
    List<FeedCursor<Map<String, Object>>> cursors = new ArrayList<>();
    try {
      for (int p = 0; p < 2; p++) {
        cursors.add(feed.open(new PartitionSpec(p, 2), StartPoint.latest()));
        starts.add(cursors.get(p).position());
      }
      sql("INSERT INTO t VALUES (" + apart[0] + ", 'x'), (" + together[0] + ", 'y')",
          "BEGIN; INSERT INTO other VALUES (1); UPDATE t SET id = " + apart[1] + " WHERE id = " + apart[0] + ";"
              + " UPDATE t SET id = " + together[1] + " WHERE id = " + together[0] + "; INSERT INTO other VALUES (2);"
              + " UPDATE t SET v = 'z' WHERE id = " + apart[1] + "; COMMIT");
      int[] expected = new int[2];
      // Partition of apart[0]: its insert and the old key's delete; of apart[1]: the new key's insert
      // and its update. The together pair's partition: all four of its changes.
      expected[PartitionSpec.indexOf(key(apart[0]), 2)] += 2;
      expected[PartitionSpec.indexOf(key(apart[1]), 2)] += 2;
      expected[PartitionSpec.indexOf(key(together[0]), 2)] += 3;
      for (int p = 0; p < 2; p++) {
        read.add(read(cursors.get(p), expected[p]));
        assertThat(cursors.get(p).poll(WAIT)).isEmpty();
      }
    } finally {
      cursors.forEach(FeedCursor::close);
    }
    List<String> all = new ArrayList<>();
    read.forEach(events -> events.forEach(e -> all.add(described(e))));
    assertThat(all).containsExactlyInAnyOrder("INSERT " + key(apart[0]) + " x", "DELETE " + key(apart[0]),
        "INSERT " + key(apart[1]) + " x", "UPDATE " + key(apart[1]) + " z",
        "INSERT " + key(together[0]) + " y", "DELETE " + key(together[0]), "INSERT " + key(together[1]) + " y");
    for (int p = 0; p < 2; p++) {
      List<ChangeEvent<Map<String, Object>>> events = read.get(p);
      int partition = p;
      assertThat(events).as("each change in its key's partition")
          .allSatisfy(e -> assertThat(PartitionSpec.indexOf(e.key(), 2)).isEqualTo(partition));
      List<Position> positions = new ArrayList<>();
      positions.add(starts.get(p));
      events.forEach(e -> positions.add(e.position()));
      for (int i = 0; i < positions.size(); i++) {
        try (FeedCursor<Map<String, Object>> c = feed.open(new PartitionSpec(p, 2), StartPoint.after(positions.get(i)))) {
          List<ChangeEvent<Map<String, Object>>> rest = read(c, events.size() - i);
          assertThat(rest).as("partition %d resumed after position %d (%s)", p, i, positions.get(i))
              .extracting(ChangeEvent::id)
              .containsExactlyElementsOf(events.subList(i, events.size()).stream().map(ChangeEvent::id).toList());
          assertThat(c.poll(WAIT)).as("nothing more after position %d", i).isEmpty();
        }
      }
    }
  }
}
