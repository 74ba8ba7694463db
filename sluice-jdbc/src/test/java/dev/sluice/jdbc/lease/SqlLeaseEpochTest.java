package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.lease.Lease;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.UUID;
import javax.sql.DataSource;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * SQL epochs come from the database clock in microseconds and never go back: the seed that
 * keeps them increasing across deletions, and max(epoch + 1, clock) for a clock that stepped
 * back while the row existed. On the real PostgreSQL and MariaDB.
 */
class SqlLeaseEpochTest {
  private static final Duration LEASE = Duration.ofSeconds(30);

  private static List<DataSource> databases() {
    return List.of(EmbeddedPostgresServer.shared().dataSource("sluice_test"),
        EmbeddedMariaDb.shared().dataSource("sluice_test"));
  }

  @Test
  void aNewRowStartsAtTheDatabaseClockInMicroseconds() {
    for (DataSource ds : databases()) {
      SqlLeaseStore store = SqlLeaseStore.builder(ds).table("lease_epochs").build();
      Instant before = store.now();
      Lease lease = store.tryAcquire(name(), "a", LEASE).orElseThrow();
      Instant after = store.now();

      assertThat(lease.epoch()).as("%s", store)
          .isBetween(micros(before), micros(after));
    }
  }

  @Test
  void epochsDoNotGoBackWhenTheDatabaseClockStepsBackWhileTheRowExists() throws SQLException {
    for (DataSource ds : databases()) {
      SqlLeaseStore store = SqlLeaseStore.builder(ds).table("lease_epochs").build();
      String name = name();
      Lease first = store.tryAcquire(name, "a", LEASE).orElseThrow();
      store.release(first);
      // Epochs granted while the clock was an hour ahead, seen from the clock now.
      long ahead = micros(store.now().plus(Duration.ofHours(1)));
      execute(ds, "UPDATE lease_epochs SET epoch = ? WHERE name = ?", ahead, name);

      Lease next = store.tryAcquire(name, "b", LEASE).orElseThrow();
      assertThat(next.epoch()).as("%s", store).isEqualTo(ahead + 1);

      // Deleting it now would let a re-created row start below `ahead`: refused.
      store.release(next);
      assertThat(store.deleteIfIdle(name, next.epoch())).as("%s", store).isFalse();
      assertThat(store.read(name)).isPresent();
      Lease again = store.tryAcquire(name, "c", LEASE).orElseThrow();
      assertThat(again.epoch()).isGreaterThan(next.epoch());
      assertThat(store.delete(again)).as("%s", store).isFalse();
      assertThat(store.read(name).orElseThrow().isHeld()).isTrue();
    }
  }

  /**
   * Why the lease fuzz does not take a grant's stamp alone as the start of a holding: PostgreSQL's
   * {@code now()} is the time the statement's transaction began, so an acquisition that waited
   * for the row behind a release in flight is stamped before the row was free. The lease stays
   * safe (it is judged free on the row as it is when locked, and the expiry written is the
   * earlier one), but the stamp is not when the holding began.
   */
  @Test
  void onPostgresAGrantWaitingBehindAReleaseIsStampedBeforeTheRowWasFree() throws Exception {
    DataSource ds = EmbeddedPostgresServer.shared().dataSource("sluice_test");
    SqlLeaseStore store = SqlLeaseStore.builder(ds).table("lease_epochs").build();
    String name = name();
    store.tryAcquire(name, "a", LEASE).orElseThrow();
    try (Connection releasing = ds.getConnection()) {
      releasing.setAutoCommit(false);
      try (PreparedStatement ps = releasing.prepareStatement(
          "UPDATE lease_epochs SET owner = NULL, expires_at = NULL WHERE name = ?")) {
        ps.setString(1, name);
        assertThat(ps.executeUpdate()).isEqualTo(1);
      }
      CompletableFuture<Optional<Lease>> waiting =
          CompletableFuture.supplyAsync(() -> store.tryAcquire(name, "b", LEASE));
      Awaitility.await().atMost(Duration.ofSeconds(10))
          .until(() -> waitingForALock(ds, "INSERT INTO lease_epochs"));
      Instant beforeFree = store.now();
      releasing.commit();

      Lease b = waiting.get(10, TimeUnit.SECONDS).orElseThrow();
      assertThat(b.expiresAt().minus(LEASE)).isBefore(beforeFree);
    }
  }

  private static boolean waitingForALock(DataSource ds, String query) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            + " AND query LIKE ?")) {
      ps.setString(1, query + "%");
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getInt(1) > 0;
      }
    }
  }

  private static String name() {
    return "epoch-" + UUID.randomUUID().toString().substring(0, 8);
  }

  private static long micros(Instant t) {
    return ChronoUnit.MICROS.between(Instant.EPOCH, t);
  }

  private static void execute(DataSource ds, String sql, long epoch, String name)
      throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setLong(1, epoch);
      ps.setString(2, name);
      assertThat(ps.executeUpdate()).isEqualTo(1);
      if (!c.getAutoCommit()) {
        c.commit();
      }
    }
  }
}
