package dev.sluice.postgres.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.deadletter.ParkedChange;
import dev.sluice.jdbc.deadletter.JdbcDeadLetterStore;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 defect 1 at the listener: a row the feed cannot convert is parked, with every later
 * change of its key, under the failure policy, and the partition goes on delivering the other
 * keys. Before, the conversion threw out of the feed, the partition reopened at its checkpoint,
 * met the row again, and nothing after it was ever delivered.
 */
class PoisonedRowOnPostgresTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  /** A jsonb document the server holds exactly and Jackson refuses (numbers up to 1000 digits). */
  private static final String POISON = "('{\"n\": 1' || repeat('0', 1200) || '}')::jsonb";
  private final String db = PG.createDatabase("poisonedrow");
  private Listener<Map<String, Object>> listener;

  @AfterEach
  void cleanUp() {
    if (listener != null) {
      listener.close();
    }
    PG.dropReplicationSlots(db);
  }

  @Test
  void aPoisonedRowIsParkedWithItsKeysLaterChangesAndTheOtherKeysAreDelivered() throws Exception {
    String url = PG.jdbcUrl(db);
    DataSource ds = ListenerOnPostgresTest.simple(url);
    // The shared server may hold this database from an earlier run: start empty.
    ListenerOnPostgresTest.sql(ds, "DROP PUBLICATION IF EXISTS pub", "DROP TABLE IF EXISTS orders",
        "DROP TABLE IF EXISTS sluice_deadletters", "DROP TABLE IF EXISTS sluice_deadletters_epochs",
        "DROP TABLE IF EXISTS sluice_lease",
        "CREATE TABLE orders (id int PRIMARY KEY, n int, doc jsonb)", "CREATE PUBLICATION pub FOR TABLE orders");
    JdbcDeadLetterStore<Map<String, Object>> dlq =
        JdbcDeadLetterStore.builder(ds, PostgresDocuments::encode, PostgresDocuments::decode).build();
    dlq.createTable();
    PostgresChangeFeed feed = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub")
        .table("public.orders").build();
    List<Integer> seen = new CopyOnWriteArrayList<>();
    listener = Listener.builder(feed, SqlLeaseStore.builder(ds).build())
        .group("g")
        .partitions(1)
        .leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofSeconds(1))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(10, Duration.ofMillis(200)))
        .onFailure(FailurePolicy.park(RetryPolicy.attempts(2, Duration.ofMillis(5), Duration.ofMillis(10)), dlq))
        .handler((change, fence) -> seen.add((Integer) change.document().get("n")))
        .build()
        .start();
    await().atMost(Duration.ofSeconds(30)).until(() -> listener.status().stream()
        .anyMatch(s -> s.state() == PartitionState.ACTIVE));

    ListenerOnPostgresTest.sql(ds,
        "INSERT INTO orders VALUES (1, 1, '{}')",
        "INSERT INTO orders VALUES (2, 2, " + POISON + ")",
        "INSERT INTO orders VALUES (3, 3, '{}')",
        "UPDATE orders SET n = 22, doc = '{}' WHERE id = 2",
        "INSERT INTO orders VALUES (4, 4, '{}')",
        "UPDATE orders SET n = 11 WHERE id = 1");

    String scope = "g/" + feed.stream();
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.size() == 4 && dlq.listKey(scope, "public.orders[\"2\"]").size() == 2);
    assertThat(seen).containsExactly(1, 3, 4, 11);
    List<ParkedChange<Map<String, Object>>> parked = dlq.listKey(scope, "public.orders[\"2\"]");
    assertThat(parked.get(0).error()).contains("Undecodable change").contains("public.orders")
        .contains("column doc").contains("type jsonb").contains("{\"n\": 1000");
    assertThat(parked.get(1).error()).as("the key's next change waits behind it, in order").contains("parked behind");
    assertThat(parked.get(1).event().document()).containsEntry("n", 22);
    assertThat(listener.status()).allSatisfy(s -> assertThat(s.state()).isEqualTo(PartitionState.ACTIVE));
  }
}
