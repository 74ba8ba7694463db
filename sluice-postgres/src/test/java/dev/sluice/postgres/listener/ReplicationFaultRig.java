package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ListenerOnPostgresTest.simple;
import static dev.sluice.postgres.listener.ListenerOnPostgresTest.sql;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.PartitionSpec;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import javax.sql.DataSource;
import org.postgresql.replication.LogSequenceNumber;

/**
 * A listener on the PostgreSQL feed whose replication connection alone goes through a {@link
 * FaultProxy} (the feed's {@code replicationUrl}), with {@code wal_sender_timeout} = 2 s set on that
 * connection only ({@code options=-c wal_sender_timeout=2s}): its catalog connections, the SQL
 * lease store (which holds the checkpoints) and the writes go straight to the shared server, so
 * the replication connection fails alone. Writes update ten keys with increasing values; the rig
 * records every delivery, every feed failure the listener reports, and samples of the slot's
 * confirmed position against the committed checkpoint.
 */
final class ReplicationFaultRig implements AutoCloseable {
  static final Duration STATUS_INTERVAL = Duration.ofMillis(500);
  static final Duration REPLICATION_TIMEOUT = Duration.ofSeconds(2);
  static final Duration LEASE = Duration.ofSeconds(3);
  static final int KEYS = 10;
  private static final AtomicInteger DATABASES = new AtomicInteger();

  record Delivery(int key, int value) {}

  record Failure(long atNanos, Throwable error) {}

  final String db;
  final DataSource ds;
  final FaultProxy proxy;
  /** The URL of the replication connections: through the proxy, wal_sender_timeout 2 s. */
  final String replicationUrl;
  final PostgresChangeFeed feed;
  final String slot;
  final LeaseStore leases;
  final List<Delivery> deliveries = new CopyOnWriteArrayList<>();
  final List<Failure> failures = new CopyOnWriteArrayList<>();
  /** Confirmed position above the checkpoint committed after it was read: must stay empty. */
  final List<String> confirmedPastCheckpoint = new CopyOnWriteArrayList<>();
  int samples;
  private final int[] written = new int[KEYS];
  private int next;
  Listener<Map<String, Object>> listener;

  ReplicationFaultRig(FaultProxies proxies, String name) throws SQLException {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    db = pg.createDatabase(name + DATABASES.incrementAndGet());
    String url = pg.jdbcUrl(db);
    ds = simple(url);
    sql(ds, "CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL)", "CREATE PUBLICATION pub FOR TABLE kv");
    proxy = proxies.to("pg-replication", "127.0.0.1", pg.port());
    replicationUrl = "jdbc:postgresql://" + proxy.address() + "/" + db + "?user=" + EmbeddedPostgresServer.USER
        + "&options=-c%20wal_sender_timeout%3D2s";
    feed = PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.kv")
        .statusInterval(STATUS_INTERVAL).replicationTimeout(REPLICATION_TIMEOUT).replicationUrl(replicationUrl)
        .build();
    slot = feed.forGroup("g").slotName(new PartitionSpec(0, 1));
    leases = SqlLeaseStore.builder(ds).build();
  }

  /** Starts the listener and waits until it streams, with every key written once. */
  Listener<Map<String, Object>> start() throws SQLException {
    listener = Listener.builder(feed, leases)
        .group("g")
        .owner("a")
        .partitions(1)
        .leaseDuration(LEASE)
        .renewInterval(Duration.ofSeconds(1))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(10, Duration.ofMillis(200)))
        .observer(new ListenerObserver() {
          @Override
          public void feedFailed(String lease, Throwable error) {
            failures.add(new Failure(System.nanoTime(), error));
          }
        })
        .handler((change, fence) -> deliveries.add(new Delivery(((Number) change.document().get("k")).intValue(),
            ((Number) change.document().get("v")).intValue())))
        .build()
        .start();
    await().atMost(Duration.ofSeconds(20)).until(() -> listener.status().get(0).state() == PartitionState.ACTIVE
        && listener.status().get(0).committed() != null);
    for (int k = 0; k < KEYS; k++) {
      sql(ds, "INSERT INTO kv VALUES (" + k + ", 0)");
    }
    await().atMost(Duration.ofSeconds(20)).until(() -> deliveries.size() >= KEYS);
    assertThat(proxy.connectionsAccepted()).as("the replication connection goes through the proxy").isPositive();
    return listener;
  }

  /** One update of the next key (its value one more), committed on a direct connection. */
  void writeOne() throws SQLException {
    int k = next++ % KEYS;
    written[k]++;
    sql(ds, "UPDATE kv SET v = " + written[k] + " WHERE k = " + k);
  }

  /** Writes one update every 50 ms and samples the slot against the checkpoint, for {@code d}. */
  void writeAndSampleFor(Duration d) throws SQLException {
    long end = System.nanoTime() + d.toNanos();
    while (System.nanoTime() < end) {
      writeOne();
      sample();
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50)); // the pace of the writes
    }
  }

  /**
   * The slot's confirmed position, then the checkpoint committed: the checkpoint only moves on, so
   * a confirmed position above the later checkpoint is one above the checkpoint of its time.
   */
  void sample() throws SQLException {
    Long confirmed = null;
    try (Connection c = ds.getConnection();
        PreparedStatement s = c.prepareStatement(
            "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, slot);
      try (ResultSet rs = s.executeQuery()) {
        if (rs.next() && rs.getString(1) != null) {
          confirmed = LogSequenceNumber.valueOf(rs.getString(1)).asLong();
        }
      }
    }
    LeaseRecord lease = leases.read(listener.config().leaseName(0)).orElseThrow();
    String checkpoint = lease.checkpoint() == null ? null : lease.checkpoint().token().split(" ")[0];
    samples++;
    if (confirmed != null && (checkpoint == null || confirmed > LogSequenceNumber.valueOf(checkpoint).asLong())) {
      confirmedPastCheckpoint.add("slot confirmed " + LogSequenceNumber.valueOf(confirmed).asString()
          + ", checkpoint " + checkpoint);
    }
  }

  /** The server process that holds the slot now, or null. */
  Integer walsender() throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement s = c.prepareStatement("SELECT active_pid FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, slot);
      try (ResultSet rs = s.executeQuery()) {
        return rs.next() ? (Integer) rs.getObject(1) : null;
      }
    }
  }

  /** Whether server process {@code pid} still exists. */
  boolean alive(int pid) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement s = c.prepareStatement("SELECT 1 FROM pg_stat_activity WHERE pid = ?")) {
      s.setInt(1, pid);
      try (ResultSet rs = s.executeQuery()) {
        return rs.next();
      }
    }
  }

  /** The first feed failure reported at or after {@code sinceNanos}, or null. */
  Failure firstFailureSince(long sinceNanos) {
    return failures.stream().filter(f -> f.atNanos() - sinceNanos >= 0).findFirst().orElse(null);
  }

  /** Waits until every key's last value was delivered. */
  void awaitAllDelivered(Duration within) {
    await().atMost(within).until(() -> {
      Map<Integer, Integer> last = lastValues();
      for (int k = 0; k < KEYS; k++) {
        if (!Integer.valueOf(written[k]).equals(last.get(k))) {
          return false;
        }
      }
      return true;
    });
  }

  private Map<Integer, Integer> lastValues() {
    Map<Integer, Integer> last = new HashMap<>();
    for (Delivery d : deliveries) {
      last.put(d.key(), d.value());
    }
    return last;
  }

  /**
   * Nothing lost: every value of every key was delivered; per-key order: a key's values rise one
   * by one, except where the listener re-opened the feed at its checkpoint and delivered again
   * (at most once per re-opening), and none of those replays goes back beyond what the
   * checkpoint batch allows.
   */
  void assertNothingLostAndOrderKept() {
    Map<Integer, List<Integer>> byKey = new HashMap<>();
    for (Delivery d : deliveries) {
      byKey.computeIfAbsent(d.key(), k -> new ArrayList<>()).add(d.value());
    }
    int reopenings = failures.size();
    for (int k = 0; k < KEYS; k++) {
      List<Integer> values = byKey.getOrDefault(k, List.of());
      for (int v = 0; v <= written[k]; v++) {
        assertThat(values).as("key %d: value %d delivered", k, v).contains(v);
      }
      int rewinds = 0;
      for (int i = 1; i < values.size(); i++) {
        int step = values.get(i) - values.get(i - 1);
        if (step <= 0) {
          rewinds++;
        } else {
          assertThat(step).as("key %d: no value skipped in %s", k, values).isEqualTo(1);
        }
      }
      assertThat(rewinds).as("key %d: replays in %s, at most one per re-opening (%d)", k, values, reopenings)
          .isLessThanOrEqualTo(reopenings);
    }
  }

  @Override
  public void close() {
    if (listener != null) {
      listener.close();
    }
    EmbeddedPostgresServer.shared().dropReplicationSlots(db);
  }
}
