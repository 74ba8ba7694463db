package dev.sluice.postgres.net;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.feed.Position;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.lease.TakeoverRecorder;
import dev.sluice.testkit.lease.TakeoverRecorder.Call;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 34 item 2.1 for a listener partition on the PostgreSQL change feed whose lease lives in the
 * SQL lease store: a holder cut off from the lease store stops before its lease can expire on the
 * database, and the peer takes over from the last committed checkpoint with nothing lost.
 *
 * <p>On the test kit's shared PostgreSQL. The holder's lease store reaches the database through a
 * {@link FaultProxy} (its own HikariCP pool, 500 ms connection timeout) that the test blackholes
 * (connections stay open, nothing comes back), while its change feed (replication connection) and
 * its handler's fenced writes go straight to the server, so changes keep arriving during the cut.
 * The peer reaches everything directly. Leases of 2 s.
 *
 * <p>The ground truth is a table per key whose {@code fence} column only moves forward: a handler
 * writes a key with {@code UPDATE ... SET fence = epoch WHERE k = ? AND fence <= epoch} and logs
 * the change in the same transaction, and {@link Fence#requireApplied} turns a write that matched
 * nothing into {@link StaleFenceException} (ADR 0003; the project has no SQL fenced-write helper).
 */
class SqlLeaseStorePartitionListenerTest {
  @RegisterExtension
  final FaultProxies proxies = new FaultProxies();

  private static final Duration LEASE = Duration.ofSeconds(2);
  /** Long enough for every assertion; the proxy ends it by itself if the test fails half-way. */
  private static final Duration CUT = Duration.ofSeconds(60);

  private final List<AutoCloseable> closing = new ArrayList<>();
  private String database;

  @AfterEach
  void closeAll() throws Exception {
    proxies.passAll();
    for (int i = closing.size() - 1; i >= 0; i--) {
      closing.get(i).close();
    }
    if (database != null) {
      EmbeddedPostgresServer.shared().dropReplicationSlots(database);
    }
  }

  /** A pool on {@code database} whose every connection goes through {@code proxy}. */
  private DataSource through(FaultProxy proxy) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl("jdbc:postgresql://" + proxy.address() + "/" + database + "?user=" + EmbeddedPostgresServer.USER);
    config.setPoolName("cut-off-lease-store");
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(500);
    config.setValidationTimeout(250);
    HikariDataSource pool = new HikariDataSource(config);
    closing.add(pool);
    return pool;
  }

  @Test
  void aPartitionCutOffFromTheSqlLeaseStoreStopsBeforeThePeerTakesItOverAndNothingIsLost() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    database = pg.createDatabase("pgnetpart" + UUID.randomUUID().toString().replace("-", "").substring(0, 12));
    DataSource direct = pg.dataSource(database);
    sql(direct, "CREATE TABLE orders (seq int PRIMARY KEY, k text NOT NULL)",
        "CREATE PUBLICATION pub FOR TABLE orders",
        "CREATE TABLE truth (k text PRIMARY KEY, fence bigint NOT NULL)",
        "INSERT INTO truth VALUES ('k0', 0), ('k1', 0), ('k2', 0), ('k3', 0)",
        "CREATE TABLE handled (seq int NOT NULL, k text NOT NULL, owner text NOT NULL, epoch bigint NOT NULL,"
            + " at bigint NOT NULL)");
    FaultProxy proxy = proxies.to("sql-lease-store", "127.0.0.1", pg.port());
    LeaseStore holderStore = SqlLeaseStore.builder(through(proxy)).build();
    LeaseStore peerStore = SqlLeaseStore.builder(direct).build();

    List<Call> calls = new CopyOnWriteArrayList<>();
    TakeoverRecorder holderSide = new TakeoverRecorder(calls);
    TakeoverRecorder peerSide = new TakeoverRecorder(calls);
    Listener<Map<String, Object>> holder = listener(holderStore, "holder", holderSide, direct);
    await().atMost(Duration.ofSeconds(20)).until(() -> holder.status().get(0).state() == PartitionState.ACTIVE
        && holder.status().get(0).committed() != null);
    Listener<Map<String, Object>> peer = listener(peerStore, "peer", peerSide, direct);

    // Changes while both run; the holder handles them and commits every 5.
    AtomicInteger produced = new AtomicInteger();
    ScheduledExecutorService producer = Executors.newSingleThreadScheduledExecutor();
    closing.add(producer::shutdownNow);
    Runnable produce = () -> {
      int seq = produced.get();
      try {
        sql(direct, "INSERT INTO orders VALUES (" + seq + ", 'k" + (seq % 4) + "')");
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
      produced.incrementAndGet();
    };
    for (int i = 0; i < 20; i++) {
      produce.run();
    }
    // Everything so far handled and committed: the last commit before the cut is then known
    // exactly (no commit can be on its way through the proxy at the cut).
    await().atMost(Duration.ofSeconds(20)).until(() -> holderSide.committedSeq() == 19);
    long holderEpoch = holder.status().get(0).epoch();
    Position checkpointAtCut = holderSide.lastCommitted();
    assertThat(peer.status().get(0).epoch()).as("the peer is a standby").isZero();
    assertThat(proxy.connectionsAccepted()).as("the holder's lease store goes through the proxy").isPositive();
    long bytesBeforeCut = proxy.bytesForwarded(FaultProxy.Direction.UPSTREAM);

    long cutAt = System.nanoTime();
    proxy.blackhole(CUT);
    producer.scheduleAtFixedRate(produce, 0, 30, TimeUnit.MILLISECONDS);

    // Watch the lease record on the database (directly) until the peer has it.
    String lease = holder.status().get(0).lease();
    AtomicReference<LeaseRecord> holdersLast = new AtomicReference<>();
    await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(20)).until(() -> {
      LeaseRecord r = peerStore.read(lease).orElseThrow();
      if (r.epoch() == holderEpoch) {
        holdersLast.set(r);
      }
      return peerSide.acquired() != null;
    });
    long peerAcquiredAt = peerSide.acquiredAt();
    Lease peersLease = peerSide.acquired();
    int lastProduced = produced.get() + 10;
    await().atMost(Duration.ofSeconds(20)).until(() -> produced.get() >= lastProduced);
    producer.shutdownNow();
    producer.awaitTermination(5, TimeUnit.SECONDS);
    int total = produced.get();
    await().atMost(Duration.ofSeconds(20)).until(() -> handledSeqs(direct).size() == total);

    // The holder noticed at its local deadline, before the peer could take the lease.
    assertThat(holderSide.lostAt()).as("the holder reported the loss").isNotZero();
    assertThat(holderSide.lostStateAt()).as("the holder's partition went LOST").isNotZero();
    assertThat(holderSide.lostAt() - cutAt).as("the holder's loss (ns) after the cut").isPositive();
    assertThat(holderSide.lostAt() - peerAcquiredAt)
        .as("the holder's loss (ns) is reported before the peer acquires").isNegative();
    assertThat(holder.status().get(0).recentLosses()).as("the holder's status counts the loss").isPositive();
    // No handler call of the holder after its local deadline: that deadline is at most the cut
    // plus the lease less the margin (every request that got through started before the cut).
    TakeoverRecorder.assertNoHandlingPastTheDeadline(calls, holder.owner(), cutAt, LEASE);

    // The peer took over only once the lease had expired on the database's clock, with a new epoch.
    assertThat(peersLease.epoch()).isGreaterThan(holderEpoch);
    assertThat(holdersLast.get()).as("the holder's record seen on the database after the cut").isNotNull();
    Instant peerGrantedAt = peersLease.expiresAt().minus(LEASE);
    assertThat(peerGrantedAt).as("the peer's grant on the database's clock")
        .isAfterOrEqualTo(holdersLast.get().expiresAt());

    // The peer resumed from the last committed checkpoint: its first change is the one after it.
    assertThat(peersLease.checkpoint()).isEqualTo(checkpointAtCut);
    assertThat(TakeoverRecorder.firstSeq(calls, peer.owner())).as("the peer's first change").isEqualTo(20);

    // Ground truth, written through fenced writes: nothing lost, and per key, every write of the
    // holder came before every write of the peer (never two owners handling one key at once).
    Set<Integer> all = new TreeSet<>();
    for (int i = 0; i < total; i++) {
      all.add(i);
    }
    assertThat(handledSeqs(direct)).isEqualTo(all);
    Map<String, Map<Long, long[]>> spans = new HashMap<>();
    try (Connection c = direct.getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT k, epoch, min(at), max(at) FROM handled GROUP BY k, epoch")) {
      while (rs.next()) {
        spans.computeIfAbsent(rs.getString(1), k -> new HashMap<>())
            .put(rs.getLong(2), new long[] {rs.getLong(3), rs.getLong(4)});
      }
    }
    assertThat(spans).hasSize(4);
    TakeoverRecorder.assertOwnersNeverOverlap(spans, holderEpoch, peersLease.epoch());

    assertThat(proxy.bytesForwarded(FaultProxy.Direction.UPSTREAM))
        .as("nothing the holder's lease store sent during the cut reached the database").isEqualTo(bytesBeforeCut);
    System.out.printf("cut at 0 ms; holder lost at %d ms (local deadline at most %d ms); peer acquired at %d ms%n",
        TimeUnit.NANOSECONDS.toMillis(holderSide.lostAt() - cutAt),
        TimeUnit.NANOSECONDS.toMillis(TakeoverRecorder.latestLocalDeadline(cutAt, LEASE) - cutAt), TimeUnit.NANOSECONDS.toMillis(peerAcquiredAt - cutAt));

    // The network heals: the old holder reaches the lease store again, finds the partition held
    // and stays a standby; the peer handles what comes next.
    long answersAtHeal = proxy.bytesForwarded(FaultProxy.Direction.DOWNSTREAM);
    proxy.pass();
    await().atMost(Duration.ofSeconds(10))
        .until(() -> proxy.bytesForwarded(FaultProxy.Direction.DOWNSTREAM) > answersAtHeal);
    for (int i = 0; i < 5; i++) {
      produce.run();
    }
    int healedTotal = produced.get();
    await().atMost(Duration.ofSeconds(20)).until(() -> handledSeqs(direct).size() == healedTotal);
    assertThat(calls.stream().filter(c -> c.seq() >= total).map(Call::epoch))
        .as("epochs of the changes written after the heal").containsOnly(peersLease.epoch());
    assertThat(holder.status().get(0).state()).as("the old holder after the heal").isNotEqualTo(PartitionState.ACTIVE);
    assertThat(holderSide.acquisitions()).as("the old holder's acquisitions").isEqualTo(1);
    assertThat(peerSide.acquisitions()).as("the peer's acquisitions").isEqualTo(1);

    // Whatever the cut-off holder still sends once the network heals is refused: a fenced write
    // of its epoch by the target, a checkpoint commit by the lease store.
    Fence stale = holderSide.fence();
    assertThat(stale.epoch()).isEqualTo(holderEpoch);
    assertThatThrownBy(() -> fencedWrite(direct, stale, 1_000_000, "k0", System.nanoTime()))
        .isInstanceOf(StaleFenceException.class);
    assertThat(handledSeqs(direct)).as("the refused write left no trace").doesNotContain(1_000_000);
    assertThatThrownBy(() -> peerStore.commit(new Lease(lease, holder.owner(), holderEpoch, Instant.now(), null),
        new Position("late", null))).isInstanceOf(LeaseLostException.class);
    assertThat(peerStore.read(lease).orElseThrow().checkpoint()).isNotEqualTo(new Position("late", null));
  }

  /**
   * Writes key {@code k} under {@code fence}: moves the key's fence forward (never back) and logs
   * the change in the same transaction; a write of an older epoch matches nothing and throws.
   */
  private static void fencedWrite(DataSource ds, Fence fence, int seq, String k, long at) throws SQLException {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      try {
        try (PreparedStatement up = c.prepareStatement("UPDATE truth SET fence = ? WHERE k = ? AND fence <= ?")) {
          up.setLong(1, fence.epoch());
          up.setString(2, k);
          up.setLong(3, fence.epoch());
          fence.requireApplied(up.executeUpdate() == 1, "truth " + k);
        }
        try (PreparedStatement in = c.prepareStatement("INSERT INTO handled VALUES (?, ?, ?, ?, ?)")) {
          in.setInt(1, seq);
          in.setString(2, k);
          in.setString(3, fence.owner());
          in.setLong(4, fence.epoch());
          in.setLong(5, at);
          in.executeUpdate();
        }
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    }
  }

  private static Set<Integer> handledSeqs(DataSource ds) throws SQLException {
    Set<Integer> seqs = new TreeSet<>();
    try (Connection c = ds.getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT seq FROM handled")) {
      while (rs.next()) {
        seqs.add(rs.getInt(1));
      }
    }
    return seqs;
  }

  private static void sql(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private Listener<Map<String, Object>> listener(LeaseStore store, String owner,
      TakeoverRecorder recorder, DataSource truth) {
    Listener<Map<String, Object>> listener = Listener.builder(
            PostgresChangeFeed.builder(EmbeddedPostgresServer.shared().jdbcUrl(database), EmbeddedPostgresServer.USER,
                null, "pub").table("public.orders").build(),
            store)
        .group("net")
        .owner(owner)
        .leaseDuration(LEASE)
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(50))
        .checkpoint(new CheckpointPolicy(5, Duration.ofMillis(200), Duration.ofHours(1), 0))
        .bootstrap(BootstrapPolicy.oldest())
        .observer(recorder)
        .handler((change, fence) -> {
          int seq = (Integer) change.document().get("seq");
          recorder.handled(seq, fence,
              at -> fencedWrite(truth, fence, seq, (String) change.document().get("k"), at));
        })
        .build();
    closing.add(listener);
    return listener.start();
  }
}
