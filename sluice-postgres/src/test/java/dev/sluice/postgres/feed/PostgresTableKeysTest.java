package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 defect 5 (ADR 0093): every key is qualified by its table, so that in a publication-wide
 * feed rows of different tables with the same key values never share a key (nor its partition's
 * key order, a parked key or a Kafka record key); the snapshot gives a row the key the stream gives
 * it; and a row's partition is the one its key names.
 */
class PostgresTableKeysTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final Duration WAIT = Duration.ofMillis(300);

  private final String db = PG.createDatabase("tablekeys" + DATABASES.incrementAndGet());

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private void sql(String... statements) throws SQLException {
    FeedTestSupport.sql(db, statements);
  }

  /** A feed of the whole publication (no table chosen). */
  private PostgresChangeFeed feed() {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub").build();
  }

  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    return FeedTestSupport.read(c, count, WAIT);
  }

  private static long count(List<ChangeEvent<Map<String, Object>>> events, Operation operation) {
    return events.stream().filter(e -> e.operation() == operation).count();
  }

  @Test
  void rowsOfDifferentTablesWithTheSameKeyValuesNeverShareAKey() throws Exception {
    sql("CREATE TABLE public.a (id int PRIMARY KEY, v text)", "CREATE TABLE public.b (id int PRIMARY KEY, v text)",
        "CREATE SCHEMA other", "CREATE TABLE other.a (id int PRIMARY KEY, v text)",
        "CREATE TABLE public.pair (id int, tag text, v text, PRIMARY KEY (id, tag))",
        "CREATE PUBLICATION pub FOR TABLE public.a, public.b, other.a, public.pair");
    try (FeedCursor<Map<String, Object>> c = feed().open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO public.a VALUES (1, 'a')", "INSERT INTO public.b VALUES (1, 'b')",
          "INSERT INTO other.a VALUES (1, 'other')", "INSERT INTO public.pair VALUES (1, 'x', 'p')",
          "DELETE FROM public.b WHERE id = 1");
      assertThat(read(c, 5)).extracting(ChangeEvent::key).containsExactly("public.a[\"1\"]", "public.b[\"1\"]",
          "other.a[\"1\"]", "public.pair[\"1\",\"x\"]", "public.b[\"1\"]");
    }
  }

  @Test
  void theSnapshotGivesARowTheKeyTheStreamGivesItAndItsPartitionIsTheOneItsKeyNames() throws Exception {
    sql("CREATE TABLE public.a (id int PRIMARY KEY, v text)", "CREATE TABLE public.b (id int PRIMARY KEY, v text)",
        "CREATE TABLE public.pair (id int, tag text, v text, PRIMARY KEY (tag, id))",
        "CREATE PUBLICATION pub FOR TABLE public.a, public.b, public.pair");
    for (int i = 0; i < 20; i++) {
      sql("INSERT INTO public.a VALUES (" + i + ", 's')", "INSERT INTO public.b VALUES (" + i + ", 's')",
          "INSERT INTO public.pair VALUES (" + i + ", 't" + i + "', 's')");
    }
    PostgresChangeFeed feed = feed();
    Map<String, Integer> snapshotKeys = new HashMap<>();
    Map<String, Integer> streamKeys = new HashMap<>();
    for (int p = 0; p < 2; p++) {
      PartitionSpec partition = new PartitionSpec(p, 2);
      try (FeedCursor<Map<String, Object>> c = feed.open(partition, StartPoint.snapshot())) {
        List<ChangeEvent<Map<String, Object>>> events = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        boolean updated = false;
        while (System.nanoTime() < deadline && !(updated && count(events, Operation.UPDATE)
            == count(events, Operation.SNAPSHOT))) {
          List<ChangeEvent<Map<String, Object>>> batch = c.poll(WAIT);
          events.addAll(batch);
          if (!updated && batch.isEmpty() && c.caughtUp()) {
            // The snapshot is read: every row changes once in the stream.
            sql("UPDATE public.a SET v = 'u'", "UPDATE public.b SET v = 'u'", "UPDATE public.pair SET v = 'u'");
            updated = true;
          }
        }
        for (ChangeEvent<Map<String, Object>> e : events) {
          assertThat(PartitionSpec.indexOf(e.key(), 2)).as("partition of %s", e.key()).isEqualTo(p);
          (e.operation() == Operation.SNAPSHOT ? snapshotKeys : streamKeys).merge(e.key(), 1, Integer::sum);
        }
      }
      PG.dropReplicationSlots(db);
    }
    assertThat(snapshotKeys).as("60 rows, each once").hasSize(60).allSatisfy((k, n) -> assertThat(n).isEqualTo(1));
    assertThat(streamKeys).as("the stream's keys are the snapshot's").isEqualTo(snapshotKeys);
    assertThat(snapshotKeys).containsKeys("public.a[\"7\"]", "public.b[\"7\"]", "public.pair[\"7\",\"t7\"]");
  }

  /**
   * Through a listener: a row of one table that cannot be processed is parked, and the row of
   * another table with the same id is not held behind it (before, both had the key {@code 1}).
   */
  @Test
  void aParkedRowOfOneTableHoldsBackNoRowOfAnotherWithTheSameId() throws Exception {
    sql("CREATE TABLE public.a (id int PRIMARY KEY, v text)", "CREATE TABLE public.b (id int PRIMARY KEY, v text)",
        "CREATE PUBLICATION pub FOR TABLE public.a, public.b");
    javax.sql.DataSource ds = PG.dataSource(db);
    dev.sluice.jdbc.deadletter.JdbcDeadLetterStore<Map<String, Object>> dlq = dev.sluice.jdbc.deadletter
        .JdbcDeadLetterStore.builder(ds, PostgresDocuments::encode, PostgresDocuments::decode).build();
    dlq.createTable();
    PostgresChangeFeed feed = feed();
    List<String> handled = java.util.Collections.synchronizedList(new ArrayList<>());
    dev.sluice.listener.Listener<Map<String, Object>> listener = dev.sluice.listener.Listener.builder(feed,
            dev.sluice.jdbc.lease.SqlLeaseStore.builder(ds).build())
        .group("keys")
        .pollWait(Duration.ofMillis(50))
        .bootstrap(dev.sluice.listener.BootstrapPolicy.oldest())
        .handler((e, fence) -> {
          if ("poison".equals(e.document() == null ? null : e.document().get("v"))) {
            throw new IllegalStateException("cannot process " + e.key());
          }
          handled.add(e.key() + "=" + (e.document() == null ? "deleted" : e.document().get("v")));
        })
        .onFailure(dev.sluice.listener.FailurePolicy.park(
            dev.sluice.listener.RetryPolicy.attempts(2, Duration.ofMillis(10), Duration.ofMillis(20)), dlq))
        .build()
        .start();
    try {
      org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(30))
          .until(() -> listener.status().stream().allMatch(p -> p.committed() != null));
      sql("INSERT INTO public.a VALUES (1, 'poison')", "INSERT INTO public.b VALUES (1, 'b1')",
          "UPDATE public.b SET v = 'b2' WHERE id = 1", "INSERT INTO public.a VALUES (2, 'a2')");
      String stream = "keys/" + feed.stream();
      org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(30))
          .until(() -> handled.size() >= 3 && dlq.count(stream) >= 1);
      assertThat(handled).containsExactlyInAnyOrder("public.b[\"1\"]=b1", "public.b[\"1\"]=b2", "public.a[\"2\"]=a2");
      assertThat(handled.indexOf("public.b[\"1\"]=b1")).as("in its key's order").isLessThan(
          handled.indexOf("public.b[\"1\"]=b2"));
      assertThat(dlq.count(stream)).as("only the poison row is parked").isEqualTo(1);
      assertThat(dlq.listKey(stream, "public.a[\"1\"]")).hasSize(1);
    } finally {
      listener.close();
    }
  }
}
