package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * A holder frozen in the middle of a lease transaction (SIGSTOP, a long GC pause, a cut network)
 * keeps its lease row locked on PostgreSQL for as long as its session waits in the transaction.
 * Found by {@code ListenerOnPostgresTest} under the load of the whole suite: a standby's
 * acquisition waited on that lock for good, long after the lease had expired. The store bounds it
 * (ADR 0070): the server ends a session idle in a lease transaction after 2 s, and an acquisition
 * waits for a row lock at most that long and counts as a lost race.
 *
 * <p>The freeze is a driver-level fake (named as such): the holder's connection blocks in {@code
 * commit()}, after its renewal's UPDATE locked the row, and never returns; the server is real.
 */
class FrozenHolderTransactionTest {

  @Test
  void aStandbyAcquiresAnExpiredLeaseWhoseHolderStoppedInsideATransaction() throws Exception {
    DataSource ds = EmbeddedPostgresServer.shared().dataSource("sluice_test");
    LeaseStore store = SqlLeaseStore.builder(ds).table("lease_frozen").build();
    CountDownLatch thaw = new CountDownLatch(1);
    LeaseStore frozenHolder = SqlLeaseStore.builder(freezingAtCommit(ds, thaw)).table("lease_frozen").build();
    String name = "frozen/orders#0of1";
    Lease held = store.tryAcquire(name, "frozen-holder", Duration.ofSeconds(1)).orElseThrow();

    Thread holder = new Thread(() -> {
      try {
        frozenHolder.renew(held, Duration.ofSeconds(1)); // freezes between its UPDATE and its commit
      } catch (RuntimeException expected) {
        // the server ended the frozen session; the holder finds out when it thaws
      }
    }, "frozen-holder");
    holder.start();
    try {
      CompletableFuture<Lease> standby = CompletableFuture.supplyAsync(() -> {
        while (true) {
          Optional<Lease> got = store.tryAcquire(name, "standby", Duration.ofSeconds(10));
          if (got.isPresent()) {
            return got.get();
          }
        }
      });
      Lease taken = standby.get(20, TimeUnit.SECONDS);
      assertThat(taken.epoch()).isGreaterThan(held.epoch());
      assertThat(store.read(name).orElseThrow().owner()).isEqualTo("standby");
    } finally {
      thaw.countDown();
      holder.join();
    }
  }

  /** {@code ds}, whose connections block in {@code commit()} until {@code thaw}. */
  private static DataSource freezingAtCommit(DataSource ds, CountDownLatch thaw) {
    return new InterceptingDataSource(ds, (method, args) -> {
      if (method.getName().equals("commit")) {
        thaw.await();
      }
    });
  }
}
