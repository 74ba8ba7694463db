package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.Ticker;
import dev.sluice.lease.Lease;
import dev.sluice.lease.internal.LeaseKeeper;
import dev.sluice.testkit.process.ChildJvm;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Session liveness of the SQL lease store (ADR 0114), one suite for each database that has it
 * ({@link PostgresSessionLivenessTest}, {@link MariaDbSessionLivenessTest}): a standby takes a
 * lease before its expiry only once the holder's recorded database session is gone, and a bound
 * after it found it gone; the holder stops within that bound of losing its session; a paused
 * holder, whose session lives on, keeps its lease until it expires; a session older than the
 * server, or recorded for an earlier epoch, is never a reason to take a lease early. The
 * crash and the pause are of a real second JVM ({@link SessionHolderProcess}): SIGKILL, whose
 * kernel closes the socket, and SIGSTOP, whose kernel keeps it.
 */
abstract class SessionLivenessContract {
  private static final String TABLE = "lease_sessions";
  /** The holders' and standbys' bound: short enough to be well inside the leases below. */
  protected static final Duration BOUND = Duration.ofMillis(1000);

  protected final List<SqlLeaseStore> stores = new ArrayList<>();
  private final List<ChildJvm> children = new ArrayList<>();
  private final List<AutoCloseable> watches = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    for (AutoCloseable w : watches) {
      w.close();
    }
    children.forEach(ChildJvm::close);
    stores.forEach(SqlLeaseStore::close);
  }

  /** The shared server's pooled DataSource. */
  protected abstract DataSource dataSource();

  /** The JDBC URL of the same database, for the holder's own process. */
  protected abstract String jdbcUrl();

  /** The database's time types. */
  protected abstract SqlDialect dialect();

  /** Ends session {@code id} from outside (an operator's kill). */
  protected abstract String terminate(long id);

  /** A time before the server started, as SQL. */
  protected abstract String beforeTheServerStarted();

  protected SqlLeaseStore store(boolean liveness) {
    SqlLeaseStore.Builder b = SqlLeaseStore.builder(dataSource()).table(TABLE);
    SqlLeaseStore store = (liveness ? b.sessionLiveness(BOUND) : b).build();
    stores.add(store);
    return store;
  }

  private static String prefix() {
    return "sessions-" + UUID.randomUUID().toString().substring(0, 8) + "/shop.orders";
  }

  private AutoCloseable watch(SqlLeaseStore store, String prefix, BlockingQueue<String> heard) {
    AutoCloseable w = store.watchReleases(prefix, heard::add);
    watches.add(w);
    return w;
  }

  private ChildJvm holder(String name, Duration lease) {
    ChildJvm child = ChildJvm.start("session-holder", SessionHolderProcess.class,
        jdbcUrl(), TABLE, name,
        Long.toString(lease.toMillis()), Long.toString(BOUND.toMillis()));
    children.add(child);
    child.awaitLineStartingWith("HELD ", Duration.ofSeconds(60));
    return child;
  }

  /** The row's epoch, expiry, recorded session pid and the database's clock. */
  private record Row(long epoch, Instant expiresAt, Long holderPid) {}

  private Row row(String name) throws SQLException {
    try (Connection c = dataSource().getConnection();
        PreparedStatement ps = c.prepareStatement(
            "SELECT epoch, expires_at, holder_pid FROM " + TABLE + " WHERE name = ?")) {
      ps.setString(1, name);
      try (ResultSet rs = ps.executeQuery()) {
        assertThat(rs.next()).as("row %s", name).isTrue();
        long pid = rs.getLong(3);
        return new Row(rs.getLong(1), dialect().getTime(rs, 2), rs.wasNull() ? null : pid);
      }
    }
  }

  protected void execute(String sql) throws SQLException {
    try (Connection c = dataSource().getConnection(); java.sql.Statement st = c.createStatement()) {
      st.execute(sql);
      if (!c.getAutoCommit()) {
        c.commit();
      }
    }
  }

  /** Acquisition's time on the database clock: the lease's expiry less its duration. */
  private static Instant acquiredAt(Lease lease, Duration duration) {
    return lease.expiresAt().minus(duration);
  }

  @Test
  void aKilledHoldersLeaseIsTakenOnceItsSessionIsGoneLongBeforeItExpires() throws Exception {
    SqlLeaseStore standby = store(true);
    String prefix = prefix();
    String name = prefix + "#0";
    Duration lease = Duration.ofSeconds(20);
    ChildJvm child = holder(name, lease);
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    watch(standby, prefix, heard);
    assertThat(standby.tryAcquire(name, "standby", lease)).as("held by the live holder").isEmpty();
    Row beforeKill = row(name);
    assertThat(beforeKill.holderPid()).as("the holder's session is recorded").isNotNull();

    child.kill(); // SIGKILL: the kernel closes its sockets, the server ends its sessions
    Row atKill = row(name);

    assertThat(heard.poll(15, TimeUnit.SECONDS)).as("the standby's watch reports the lease").isEqualTo(name);
    assertThat(standby.read(name).orElseThrow().isHeld()).as("reads as expired to the standby").isFalse();
    Lease taken = standby.tryAcquire(name, "standby", lease).orElseThrow();
    assertThat(taken.epoch()).isGreaterThan(atKill.epoch());
    assertThat(acquiredAt(taken, lease)).as("taken before the dead holder's lease expired")
        .isBefore(atKill.expiresAt());
    assertThat(standby.liveness(taken)).as("granted with the standby's own session").isNotNull();
    assertThat(row(name).holderPid()).isNotEqualTo(atKill.holderPid());
  }

  @Test
  void aPausedHolderKeepsItsSessionAndSoItsLeaseUntilItExpires() throws Exception {
    SqlLeaseStore standby = store(true);
    String prefix = prefix();
    String name = prefix + "#0";
    Duration lease = Duration.ofSeconds(3);
    ChildJvm child = holder(name, lease);
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    watch(standby, prefix, heard);

    child.pause(); // SIGSTOP: the kernel keeps its sockets open, so the server keeps its session
    Row atPause = row(name);
    AtomicReference<Lease> taken = new AtomicReference<>();
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(100)).until(() -> {
      standby.tryAcquire(name, "standby", lease).ifPresent(taken::set);
      return taken.get() != null;
    });
    assertThat(acquiredAt(taken.get(), lease)).as("not before the paused holder's lease expired")
        .isAfterOrEqualTo(atPause.expiresAt());
    assertThat(heard).as("no session was found gone: the paused holder's is alive").isEmpty();
    child.resume();
  }

  @Test
  void aHolderWhoseSessionEndsStopsBeforeAStandbyTakesItsLease() throws Exception {
    SqlLeaseStore holder = store(true);
    SqlLeaseStore standby = store(true);
    String prefix = prefix();
    String name = prefix + "#0";
    Duration lease = Duration.ofSeconds(20);
    long start = System.nanoTime();
    Lease held = holder.tryAcquire(name, "holder", lease).orElseThrow();
    AtomicReference<String> lostWhy = new AtomicReference<>();
    ScheduledExecutorService renewals = Executors.newSingleThreadScheduledExecutor();
    try {
      LeaseKeeper keeper = new LeaseKeeper(holder, held, start, lease, lease.dividedBy(3), renewals,
          Ticker.system(), (l, cause) -> lostWhy.set(cause.getMessage()));
      keeper.start();
      BlockingQueue<String> heard = new LinkedBlockingQueue<>();
      watch(standby, prefix, heard);
      Row before = row(name);

      // The holder's process lives on; only its session ends (an operator, a cut the server saw).
      execute(terminate(before.holderPid()));

      assertThat(heard.poll(15, TimeUnit.SECONDS)).isEqualTo(name);
      // The holder's own judgement at the moment the standby may try: it has stopped.
      assertThat(keeper.isValid()).as("the holder stopped before the standby tries").isFalse();
      Lease taken = standby.tryAcquire(name, "standby", lease).orElseThrow();
      await().atMost(Duration.ofSeconds(10)).until(() -> lostWhy.get() != null);
      assertThat(lostWhy.get()).contains("database session").contains("(id " + before.holderPid() + ",");
      assertThat(taken.epoch()).isGreaterThan(held.epoch());
      assertThat(acquiredAt(taken, lease)).isBefore(before.expiresAt());
      // The holder's store carries on with a new session for what it takes next.
      Lease other = holder.tryAcquire(prefix + "#1", "holder", lease).orElseThrow();
      assertThat(holder.liveness(other)).isNotNull();
      assertThat(row(prefix + "#1").holderPid()).isNotEqualTo(before.holderPid());
    } finally {
      renewals.shutdownNow();
    }
  }

  /**
   * Two rows whose recorded sessions do not exist: one began after the server started (a crash:
   * taken early), one before (what a restart leaves: its holder may reconnect, so it waits for its
   * expiry). The first's notice bounds the wait for the second's, which the same query judged.
   */
  @Test
  void aSessionOlderThanTheServerIsNotCountedGone() throws Exception {
    SqlLeaseStore holder = store(true);
    SqlLeaseStore standby = store(true);
    String prefix = prefix();
    Duration lease = Duration.ofMinutes(5);
    holder.tryAcquire(prefix + "#crashed", "holder", lease).orElseThrow();
    holder.tryAcquire(prefix + "#restarted", "holder", lease).orElseThrow();
    execute("UPDATE " + TABLE + " SET holder_pid = 2147483647 WHERE name = '" + prefix + "#crashed'");
    execute("UPDATE " + TABLE + " SET holder_pid = 2147483646, holder_since = " + beforeTheServerStarted()
        + " WHERE name = '" + prefix + "#restarted'");
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    watch(standby, prefix, heard);

    assertThat(heard.poll(15, TimeUnit.SECONDS)).isEqualTo(prefix + "#crashed");
    assertThat(standby.tryAcquire(prefix + "#restarted", "standby", lease)).isEmpty();
    assertThat(standby.read(prefix + "#restarted").orElseThrow().isHeld()).isTrue();
    assertThat(standby.tryAcquire(prefix + "#crashed", "standby", lease)).isPresent();
    assertThat(heard).isEmpty();
  }

  /**
   * A lease taken by a store without the option keeps the session columns of the holder before
   * it, whose session may be gone: they belong to an older epoch and must not let anyone take
   * the new holder's lease early.
   */
  @Test
  void aSessionRecordedForAnEarlierEpochIsNeverAReasonToTakeTheLease() throws Exception {
    SqlLeaseStore first = store(true);
    SqlLeaseStore plain = store(false);
    SqlLeaseStore standby = store(true);
    String prefix = prefix();
    Duration lease = Duration.ofMinutes(5);
    Lease control = first.tryAcquire(prefix + "#control", "first", lease).orElseThrow();
    Lease before = first.tryAcquire(prefix + "#handed", "first", lease).orElseThrow();
    assertThat(first.release(before)).isTrue();
    Lease now = plain.tryAcquire(prefix + "#handed", "plain", lease).orElseThrow();
    assertThat(row(prefix + "#handed").holderPid()).as("the first holder's session is still in the row")
        .isNotNull();
    BlockingQueue<String> heard = new LinkedBlockingQueue<>();
    watch(standby, prefix, heard);

    // The first holder's session ends (as when its process dies): the control lease's holder is gone.
    execute(terminate(row(control.name()).holderPid()));

    assertThat(heard.poll(15, TimeUnit.SECONDS)).isEqualTo(control.name());
    assertThat(standby.tryAcquire(now.name(), "standby", lease)).isEmpty();
    assertThat(standby.read(now.name()).orElseThrow().isHeld()).isTrue();
    assertThat(plain.renew(now, lease).epoch()).isEqualTo(now.epoch());
    assertThat(heard).isEmpty();
  }
}
