package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * Release notices of the SQL lease store (LeaseStore#watchReleases, ADR 0061) on a real PostgreSQL
 * 17: releases and deletions notify in the statement that makes them; the watch listens before it
 * returns, comes back after its connection is killed, and gives its connection back when closed.
 * On MariaDB, which has no notifications, there is no watch and nothing else changes.
 */
class PostgresReleaseNoticesTest {
  private static final Duration LONG = Duration.ofMinutes(5);

  private static DataSource postgres() {
    return EmbeddedPostgresServer.shared().dataSource("sluice_test");
  }

  private static SqlLeaseStore store(DataSource dataSource) {
    return SqlLeaseStore.builder(dataSource).table("lease_notices").build();
  }

  private static String prefix() {
    return "notice-" + UUID.randomUUID().toString().substring(0, 8) + "/shop.orders";
  }

  /** The next {@code n} notices, each within 30 s. */
  private static List<String> next(BlockingQueue<String> heard, int n) throws InterruptedException {
    List<String> out = new ArrayList<>();
    while (out.size() < n) {
      String name = heard.poll(30, TimeUnit.SECONDS);
      assertThat(name).as("notice %d within 30 s after %s", out.size() + 1, out).isNotNull();
      out.add(name);
    }
    return out;
  }

  @Test
  void releasesAndDeletionsUnderThePrefixAreReportedFromTheFirstOnButNotRenewalsOrOtherPrefixes() throws Exception {
    LeaseStore store = store(postgres());
    String prefix = prefix();
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    try (AutoCloseable watch = store.watchReleases(prefix, heard::add)) {
      // No warm-up: the watch listens before watchReleases returns.
      Lease zero = store.tryAcquire(prefix + "#0", "a", LONG).orElseThrow();
      store.renew(zero, LONG);
      assertThat(store.release(store.tryAcquire("other-" + prefix + "#0", "a", LONG).orElseThrow())).isTrue();
      assertThat(store.release(zero)).isTrue();
      assertThat(store.release(zero)).as("released already: nothing changes, nothing is notified").isFalse();
      assertThat(store.delete(store.tryAcquire(prefix + "#1", "a", LONG).orElseThrow())).isTrue();
      Lease two = store.tryAcquire(prefix + "#2", "a", LONG).orElseThrow();
      store.release(two);
      assertThat(store.deleteIfIdle(prefix + "#2", two.epoch())).isTrue();

      assertThat(next(heard, 3)).containsExactly(prefix + "#0", prefix + "#1", prefix + "#2");
      assertThat(next(heard, 1)).containsExactly(prefix + "#2");
      assertThat(heard).isEmpty();
    }
  }

  @Test
  void theWatchListensAgainAfterItsConnectionIsKilled() throws Exception {
    LeaseStore store = store(postgres());
    String prefix = prefix();
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    try (AutoCloseable watch = store.watchReleases(prefix, heard::add)) {
      store.release(store.tryAcquire(prefix + "#before", "a", LONG).orElseThrow());
      assertThat(next(heard, 1)).containsExactly(prefix + "#before");

      assertThat(terminateListeners()).as("backends listening for release notices").isGreaterThanOrEqualTo(1);

      // Releases while it is listening again are not heard (a hint: peers try on their schedule);
      // release until one is.
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        store.release(store.tryAcquire(prefix + "#after", "a", LONG).orElseThrow());
        return (prefix + "#after").equals(heard.poll(300, TimeUnit.MILLISECONDS));
      });
    }
  }

  @Test
  void aWatchStartedWhileTheDatabaseCannotBeReachedListensOnceItCan() throws Exception {
    DataSource real = postgres();
    java.util.concurrent.atomic.AtomicInteger refusals = new java.util.concurrent.atomic.AtomicInteger(2);
    DataSource unreachableAtFirst = (DataSource) java.lang.reflect.Proxy.newProxyInstance(
        DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, (proxy, method, args) -> {
          if (method.getName().equals("getConnection") && refusals.getAndDecrement() > 0) {
            throw new SQLException("Connection refused (the test's unreachable database)", "08001");
          }
          try {
            return method.invoke(real, args);
          } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause();
          }
        });
    LeaseStore releasing = store(real);
    String prefix = prefix();
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    try (AutoCloseable watch = store(unreachableAtFirst).watchReleases(prefix, heard::add)) {
      assertThat(watchThreads(prefix)).as("a watch that keeps trying").isEqualTo(1);
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        releasing.release(releasing.tryAcquire(prefix + "#0", "a", LONG).orElseThrow());
        return (prefix + "#0").equals(heard.poll(300, TimeUnit.MILLISECONDS));
      });
      assertThat(refusals.get()).as("both refused connections were asked for").isNegative();
    }
  }

  @Test
  void aClosedWatchEndsItsThreadAndNoLongerListens() throws Exception {
    LeaseStore store = store(postgres());
    String prefix = prefix();
    AutoCloseable watch = store.watchReleases(prefix, name -> { });
    assertThat(watchThreads(prefix)).isEqualTo(1);
    watch.close(); // returns at once; the thread ends after its current wait
    await().atMost(Duration.ofSeconds(5)).until(() -> watchThreads(prefix) == 0);
    assertThat(listeningBackends()).as("connections still listening after the watch ended").isZero();
  }

  @Test
  void onMariaDbThereIsNoWatchAndReleasesWorkAsBefore() throws Exception {
    SqlLeaseStore store = store(EmbeddedMariaDb.shared().dataSource("sluice_test"));
    String prefix = prefix();
    try (AutoCloseable watch = store.watchReleases(prefix, name -> { })) {
      assertThat(watchThreads(prefix)).isZero();
      Lease lease = store.tryAcquire(prefix + "#0", "a", LONG).orElseThrow();
      assertThat(store.release(lease)).isTrue();
      assertThat(store.release(lease)).isFalse();
      Lease again = store.tryAcquire(prefix + "#0", "b", LONG).orElseThrow();
      assertThat(store.delete(again)).isTrue();
    }
  }

  @Test
  void aChannelNameStaysWithinPostgresLimitAndFoldsCaseLikeTheTable() {
    assertThat(ReleaseNotices.channel("Sluice_Lease")).isEqualTo("sluice_release.sluice_lease");
    String longTable = "s".repeat(63) + "." + "t".repeat(63);
    String channel = ReleaseNotices.channel(longTable);
    assertThat(channel).hasSizeLessThanOrEqualTo(63);
    assertThat(channel).isNotEqualTo(ReleaseNotices.channel("s".repeat(63) + "." + "u".repeat(63)));
  }

  private static long watchThreads(String prefix) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("sluice-release-watch-" + prefix) && t.isAlive()).count();
  }

  /** Backends of the test database whose session listens on a channel (their last statement LISTEN). */
  private static int listeningBackends() throws SQLException {
    try (Connection c = postgres().getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM pg_stat_activity"
            + " WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'");
        ResultSet rs = ps.executeQuery()) {
      rs.next();
      return rs.getInt(1);
    }
  }

  private static int terminateListeners() throws SQLException {
    try (Connection c = postgres().getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            + " WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN %'");
        ResultSet rs = ps.executeQuery()) {
      int n = 0;
      while (rs.next()) {
        n++;
      }
      return n;
    }
  }
}
