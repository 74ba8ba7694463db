package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * An acquisition that read an expired record must not take over the record someone else inserted
 * after that one was deleted. Found by {@code SqlLeaseFuzzTest} on MariaDB under the load of the
 * full suite ("overlap ... or epochs do not increase in time"): the record was deleted
 * ({@code deleteIfIdle}) and inserted again at version 1, the same version the slow acquisition had
 * read, and MariaDB's UPDATE (which reads the newest committed row) matched the new record. The
 * CAS now also compares the epoch, which a new record never repeats.
 *
 * <p>The interleaving is forced with a driver-level fake (named as such): the slow acquisition's
 * connection waits before preparing its UPDATE until the record was deleted and taken by another
 * owner; the servers are real.
 */
class ReinsertedRecordTest {

  @Test
  void onMariaDb() throws Exception {
    check(EmbeddedMariaDb.shared().dataSource("sluice_test"));
  }

  @Test
  void onPostgres() throws Exception {
    check(EmbeddedPostgresServer.shared().dataSource("sluice_test"));
  }

  private static void check(DataSource ds) throws Exception {
    String table = "lease_reinserted";
    LeaseStore store = SqlLeaseStore.builder(ds).table(table).build();
    String name = "reinserted/" + System.nanoTime();
    Lease expired = store.tryAcquire(name, "crashed", Duration.ofMillis(200)).orElseThrow();
    await().atMost(Duration.ofSeconds(10)).until(() -> !store.read(name).orElseThrow().isHeld());

    CountDownLatch reached = new CountDownLatch(1);
    CountDownLatch go = new CountDownLatch(1);
    LeaseStore slow = SqlLeaseStore.builder(pausingBeforeUpdate(ds, reached, go)).table(table)
        .readThenWriteAcquire().build();
    CompletableFuture<Optional<Lease>> a = CompletableFuture.supplyAsync(
        () -> slow.tryAcquire(name, "A", Duration.ofSeconds(10)));
    try {
      assertThat(reached.await(10, TimeUnit.SECONDS)).as("A read the expired record").isTrue();
      assertThat(store.deleteIfIdle(name, expired.epoch())).isTrue();
      Lease b = store.tryAcquire(name, "B", Duration.ofSeconds(10)).orElseThrow();
      assertThat(b.epoch()).isGreaterThan(expired.epoch());
    } finally {
      go.countDown();
    }
    assertThat(a.get(20, TimeUnit.SECONDS)).as("A's acquisition of the record it read").isEmpty();
    assertThat(store.read(name).orElseThrow().owner()).isEqualTo("B");
  }

  /** {@code ds}, whose connections wait before preparing an UPDATE until {@code go}. */
  private static DataSource pausingBeforeUpdate(DataSource ds, CountDownLatch reached, CountDownLatch go) {
    return new InterceptingDataSource(ds, (method, args) -> {
      if (method.getName().equals("prepareStatement") && String.valueOf(args[0]).startsWith("UPDATE")) {
        reached.countDown();
        go.await();
      }
    });
  }
}
