package dev.sluice.postgres.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Issue 13 items 1 and 2: the listener engine on the PostgreSQL feed, its partitions guarded by the
 * SQL lease store on the same database: every change delivered across a clean restart, across
 * SIGKILL of the listener JVM (redelivery bounded by the checkpoint batch) and across kill -9 of
 * the PostgreSQL server itself; the slot never confirms beyond the committed checkpoint.
 */
class ListenerOnPostgresTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private final List<Listener<?>> listeners = new ArrayList<>();
  private final List<ChildJvm> children = new ArrayList<>();

  private final List<String> sharedDatabases = new ArrayList<>();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
    children.forEach(ChildJvm::close);
    sharedDatabases.forEach(EmbeddedPostgresServer.shared()::dropReplicationSlots);
  }

  /** A database with the {@code orders} table in publication {@code pub}. */
  private record Orders(String name, String url, DataSource ds) {}

  /** A new database on the shared server with {@code orders} published; its slots are dropped after the test. */
  private Orders ordersDatabase() throws SQLException {
    String db = sharedDatabase();
    String url = EmbeddedPostgresServer.shared().jdbcUrl(db);
    DataSource ds = simple(url);
    sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders");
    return new Orders(db, url, ds);
  }

  /** A new database on the shared server, whose slots are dropped after the test. */
  private String sharedDatabase() {
    String db = EmbeddedPostgresServer.shared().createDatabase("pglistener" + DATABASES.incrementAndGet());
    sharedDatabases.add(db);
    return db;
  }

  /** A data source opening a connection per call, so it works again after the server restarts. */
  static DataSource simple(String url) {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setUrl(url);
    ds.setUser(EmbeddedPostgresServer.USER);
    ds.setConnectTimeout(5);
    ds.setSocketTimeout(30);
    return ds;
  }

  static void sql(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private static Set<Integer> range(int from, int to) {
    Set<Integer> s = new HashSet<>();
    for (int i = from; i < to; i++) {
      s.add(i);
    }
    return s;
  }

  private Listener<Map<String, Object>> listener(String url, String owner, int partitions, List<Integer> seen) {
    return listener(url, "g", owner, partitions, BootstrapPolicy.oldest(), seen);
  }

  private Listener<Map<String, Object>> listener(String url, String group, String owner, int partitions,
      BootstrapPolicy bootstrap, List<Integer> seen) {
    return listener(url, group, owner, partitions, bootstrap, CheckpointPolicy.every(10, Duration.ofMillis(200)), seen);
  }

  private Listener<Map<String, Object>> listener(String url, String group, String owner, int partitions,
      BootstrapPolicy bootstrap, CheckpointPolicy checkpoint, List<Integer> seen) {
    Listener<Map<String, Object>> l = Listener.builder(
            PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build(),
            SqlLeaseStore.builder(simple(url)).build())
        .group(group)
        .owner(owner)
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofSeconds(1))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(bootstrap)
        .checkpoint(checkpoint)
        .handler((change, fence) -> seen.add((Integer) change.document().get("n")))
        .build();
    listeners.add(l);
    return l.start();
  }

  @Test
  void twoPartitionsDeliverEveryChangeOnceAcrossACleanRestartAndTheSlotsConfirmNoMoreThanTheCheckpoints()
      throws Exception {
    Orders orders = ordersDatabase();
    String db = orders.name();
    String url = orders.url();
    DataSource ds = orders.ds();
    List<Integer> seen = new CopyOnWriteArrayList<>();
    Listener<Map<String, Object>> first = listener(url, "a", 2, seen);
    await().atMost(Duration.ofSeconds(30)).until(() -> first.status().stream()
        .allMatch(s -> s.state() == PartitionState.ACTIVE && s.committed() != null));
    sql(ds, "BEGIN; " + inserts(0, 100) + " COMMIT");
    insertEach(ds, 100, 150);
    await().atMost(Duration.ofSeconds(60)).until(() -> new HashSet<>(seen).equals(range(0, 150)));
    first.close();
    listeners.remove(first);

    sql(ds, "BEGIN; " + inserts(150, 200) + " COMMIT");
    Listener<Map<String, Object>> second = listener(url, "b", 2, seen);
    await().atMost(Duration.ofSeconds(60)).until(() -> new HashSet<>(seen).equals(range(0, 200)));
    assertThat(seen).as("a clean stop commits what it processed: nothing twice").hasSize(200);

    // The slot of each partition has confirmed at most its committed checkpoint.
    LeaseStore leases = SqlLeaseStore.builder(ds).build();
    for (int p = 0; p < 2; p++) {
      String lease = second.config().leaseName(p);
      String checkpoint = leases.read(lease).orElseThrow().checkpoint().token().split(" ")[0];
      String slot = "sluice_" + db + "_g_public_orders_" + p + "of2";
      try (Connection c = ds.getConnection(); Statement s = c.createStatement();
          ResultSet rs = s.executeQuery("SELECT confirmed_flush_lsn <= '" + checkpoint + "'::pg_lsn"
              + " FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
        assertThat(rs.next()).as("slot %s exists", slot).isTrue();
        assertThat(rs.getBoolean(1)).as("slot %s confirmed no more than checkpoint %s", slot, checkpoint).isTrue();
      }
    }
  }

  /**
   * Two applications reading one table: each consumer group has slots of its own, so each gets
   * every change; the one bootstrapping by snapshot also gets the rows that existed before, once,
   * across three instances sharing four partitions, one of which stops half way.
   */
  @Test
  void twoGroupsOnOneTableEachGetEveryChangeAndASnapshotBootstrapDeliversTheExistingRowsOnce() throws Exception {
    Orders orders = ordersDatabase();
    String url = orders.url();
    DataSource ds = orders.ds();
    sql(ds,
        "BEGIN; " + inserts(0, 300) + " COMMIT");
    List<Integer> search = new CopyOnWriteArrayList<>();
    List<Integer> audit = new CopyOnWriteArrayList<>();
    List<Listener<Map<String, Object>>> searchers = new ArrayList<>();
    for (String owner : List.of("a", "b", "c")) {
      searchers.add(listener(url, "search", owner, 4, BootstrapPolicy.snapshot(), search));
    }
    Listener<Map<String, Object>> auditor = listener(url, "audit", "a", 1, BootstrapPolicy.oldest(), audit);
    await().atMost(Duration.ofSeconds(60)).until(() -> auditor.status().get(0).committed() != null
        && searchers.stream().flatMap(l -> l.status().stream()).filter(s -> s.state() == PartitionState.ACTIVE).count() == 4);
    insertEach(ds, 300, 350);
    await().atMost(Duration.ofSeconds(60)).until(() -> new HashSet<>(search).containsAll(range(280, 320)));
    searchers.get(1).close(); // its partitions move to the others
    sql(ds, "BEGIN; " + inserts(350, 400) + " COMMIT");
    await().atMost(Duration.ofSeconds(90)).until(() -> new HashSet<>(search).equals(range(0, 400))
        && new HashSet<>(audit).equals(range(300, 400)));
    assertThat(audit).as("the audit group starts at its slot's creation, each change once").hasSize(100);
    assertThat(search.size()).as("a clean hand-over repeats nothing").isEqualTo(400);
  }

  /** Inserts rows {@code from} until {@code to}, each in a transaction of its own. */
  private static void insertEach(DataSource ds, int from, int to) throws SQLException {
    for (int i = from; i < to; i++) {
      sql(ds, "INSERT INTO orders VALUES (" + i + ", " + i + ")");
    }
  }

  private static String inserts(int from, int to) {
    StringBuilder s = new StringBuilder();
    for (int i = from; i < to; i++) {
      s.append("INSERT INTO orders VALUES (").append(i).append(", ").append(i).append("); ");
    }
    return s.toString();
  }

  @Test
  void afterSigkillOfTheListenerJvmNothingIsLostAndRedeliveryIsBoundedByTheBatch() throws Exception {
    Orders orders = ordersDatabase();
    String url = orders.url();
    DataSource ds = orders.ds();
    sql(ds, "CREATE TABLE deliveries (n int, node text)");
    int batch = 20;
    ChildJvm first = ChildJvm.start("first", PgRecordingNode.class, url, "first", Integer.toString(batch));
    children.add(first);
    // A new slot starts where it is created: write once the partition bootstrapped (issue 13 item 3,
    // the snapshot of existing rows, is what covers rows written before).
    first.awaitLine(l -> l.contains("bootstrapped at"), Duration.ofSeconds(60));
    sql(ds, "BEGIN; " + inserts(0, 300) + " COMMIT");
    first.awaitLine(l -> l.startsWith("DELIVERED 100"), Duration.ofSeconds(60));
    first.kill();
    insertEach(ds, 300, 400);
    ChildJvm second = ChildJvm.start("second", PgRecordingNode.class, url, "second", Integer.toString(batch));
    children.add(second);
    await().atMost(Duration.ofSeconds(90)).until(() -> delivered(ds).keySet().equals(range(0, 400)));

    Map<Integer, Integer> counts = delivered(ds);
    long twice = counts.values().stream().filter(c -> c == 2).count();
    assertThat(counts.values()).as("at most twice").allMatch(c -> c <= 2);
    assertThat(twice).as("redelivered: what the killed JVM processed after its last commit").isLessThanOrEqualTo(batch);
  }

  /**
   * Session liveness (ADR 0114, issue 36 target 3) end to end: two listener JVMs whose SQL lease
   * store records their database sessions, lease 20 s, bound 1 s. After SIGKILL of the holder, the
   * standby takes its partition long before the dead holder's leases expire (the grant's epoch is
   * the database clock in microseconds), and nothing written around the kill is lost.
   */
  @Test
  void withSessionLivenessAKilledHoldersPartitionIsTakenBeforeItsLeaseExpires() throws Exception {
    Orders orders = ordersDatabase();
    String url = orders.url();
    DataSource ds = orders.ds();
    sql(ds, "CREATE TABLE deliveries (n int, node text)");
    List<String> jvm = new ArrayList<>(ChildJvm.DEFAULT_OPTIONS);
    jvm.addAll(List.of("-Dnode.lease.ms=20000", "-Dnode.session.ms=1000"));
    ChildJvm first = ChildJvm.start("first", jvm, PgRecordingNode.class, url, "first", "20");
    children.add(first);
    first.awaitLine(l -> l.contains("bootstrapped at"), Duration.ofSeconds(60));
    ChildJvm second = ChildJvm.start("second", jvm, PgRecordingNode.class, url, "second", "20");
    children.add(second);
    second.awaitLineStartingWith("READY second", Duration.ofSeconds(60));
    sql(ds, "BEGIN; " + inserts(0, 100) + " COMMIT");
    first.awaitLine(l -> l.startsWith("DELIVERED 100"), Duration.ofSeconds(60));
    assertThat(second.output()).as("a standby until the kill").noneMatch(l -> l.startsWith("ACQUIRED"));

    first.kill();
    Instant deadExpiry;
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT min(expires_at) FROM sluice_lease WHERE owner LIKE 'first/%'")) {
      rs.next();
      deadExpiry = rs.getObject(1, OffsetDateTime.class).toInstant();
    }
    insertEach(ds, 100, 150);

    String acquired = second.awaitLineStartingWith("ACQUIRED second", Duration.ofSeconds(60));
    long grantedMicros = Long.parseLong(acquired.substring(acquired.indexOf("epoch=") + "epoch=".length()).trim());
    assertThat(Instant.EPOCH.plus(grantedMicros, ChronoUnit.MICROS))
        .as("taken before the dead holder's leases expired").isBefore(deadExpiry);
    await().atMost(Duration.ofSeconds(60)).until(() -> delivered(ds).keySet().equals(range(0, 150)));
    assertThat(delivered(ds).values()).as("at most twice").allMatch(n -> n <= 2);
  }

  /**
   * SIGKILL of the listener JVM in the middle of a snapshot bootstrap of 3,000 rows, with writes
   * before and after the crash on both sides of the checkpoint's key: the next JVM continues the
   * snapshot after the checkpoint and every row arrives in its latest state, redelivery bounded by
   * the checkpoint batch, and no state older than one already delivered.
   */
  @Test
  void afterSigkillInTheMiddleOfASnapshotTheNextJvmContinuesItWithoutGapsOrStaleRows() throws Exception {
    Orders orders = ordersDatabase();
    String url = orders.url();
    DataSource ds = orders.ds();
    sql(ds,
        "CREATE TABLE deliveries (n int, node text)",
        "INSERT INTO orders SELECT g, g FROM generate_series(0, 2999) g");
    int batch = 20;
    ChildJvm first = ChildJvm.start("first", PgRecordingNode.class, url, "first", Integer.toString(batch), "snapshot");
    children.add(first);
    first.awaitLine(l -> l.startsWith("DELIVERED 100"), Duration.ofSeconds(60));
    sql(ds, "INSERT INTO orders SELECT g, g FROM generate_series(3000, 3049) g");
    first.awaitLine(l -> l.startsWith("DELIVERED 1000"), Duration.ofSeconds(60));
    first.kill();
    // Between the crash and the next snapshot: rows before the checkpoint's key (read already)
    // and after it (to be read in the next snapshot) change.
    sql(ds, "UPDATE orders SET n = n + 100000 WHERE id < 50",
        "UPDATE orders SET n = n + 200000 WHERE id BETWEEN 2900 AND 2949",
        "INSERT INTO orders SELECT g, g FROM generate_series(3050, 3099) g");
    ChildJvm second = ChildJvm.start("second", PgRecordingNode.class, url, "second", Integer.toString(batch),
        "snapshot");
    children.add(second);
    Set<Integer> expected = new HashSet<>(range(0, 3100));
    expected.removeAll(range(2900, 2950)); // read only in their newer state, by the second snapshot
    expected.addAll(range(100000, 100050));
    expected.addAll(range(202900, 202950));
    await().atMost(Duration.ofSeconds(120)).until(() -> delivered(ds).keySet().containsAll(expected));
    sql(ds, "INSERT INTO orders VALUES (5000, 5000)");
    expected.add(5000);
    await().atMost(Duration.ofSeconds(60)).until(() -> delivered(ds).containsKey(5000));
    Map<Integer, Integer> counts = delivered(ds);
    assertThat(counts.keySet()).as("every row in its latest state; no state older than one delivered")
        .isEqualTo(expected);
    assertThat(counts.values()).as("at most twice").allMatch(c -> c <= 2);
    assertThat(counts.values().stream().filter(c -> c == 2).count()).as("redelivered after the kill")
        .isLessThanOrEqualTo(batch);
  }

  /**
   * One transaction of 100,000 rows: the listener checkpoints inside it (it never holds the
   * transaction), and a hand-over in the middle resumes at the next row: every row once.
   */
  /**
   * A rolling restart on a slow schedule: the standby found the partition held and waits for the
   * holder's lease to expire (30 s) or for its own next attempt (60 s); the holder stops gracefully
   * and the standby, told through PostgreSQL notifications (the SQL lease store's release notices,
   * ADR 0061), holds the partition within seconds and reads on from the handed-over checkpoint.
   */
  @Test
  void aStandbyToldOfAGracefulReleaseThroughNotificationsTakesOverBeforeTheLeaseWouldExpire() throws Exception {
    Orders orders = ordersDatabase();
    List<Integer> seen = new CopyOnWriteArrayList<>();
    Listener<Map<String, Object>> first = onSlowSchedule(orders.url(), "a", SqlLeaseStore.builder(simple(orders.url())).build(), seen);
    await().atMost(Duration.ofSeconds(30)).until(() -> first.status().get(0).state() == PartitionState.ACTIVE);
    sql(orders.ds(), "INSERT INTO orders VALUES (1, 1)");
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.contains(1));

    AtomicInteger foundHeld = new AtomicInteger();
    LeaseStore standbyStore = new ForwardingLeaseStore(SqlLeaseStore.builder(simple(orders.url())).build()) {
      @Override
      public java.util.Optional<dev.sluice.lease.Lease> tryAcquire(String name, String owner, Duration duration) {
        java.util.Optional<dev.sluice.lease.Lease> got = super.tryAcquire(name, owner, duration);
        if (got.isEmpty() && name.contains("#")) {
          foundHeld.incrementAndGet();
        }
        return got;
      }
    };
    Listener<Map<String, Object>> second = onSlowSchedule(orders.url(), "b", standbyStore, seen);
    await().atMost(Duration.ofSeconds(30)).until(() -> foundHeld.get() >= 1);

    first.close();
    listeners.remove(first);
    await("taken over well before the 30 s lease would have expired").atMost(Duration.ofSeconds(15))
        .until(() -> second.status().get(0).state() == PartitionState.ACTIVE);
    assertThat(foundHeld.get()).as("the standby's attempts that found the partition held").isEqualTo(1);
    sql(orders.ds(), "INSERT INTO orders VALUES (2, 2)");
    await().atMost(Duration.ofSeconds(30)).until(() -> seen.contains(2));
    assertThat(seen).containsExactly(1, 2);
  }

  /** Lease 30 s, renewals every 10 s, an attempt every 60 s: a standby never polls itself to a release. */
  private Listener<Map<String, Object>> onSlowSchedule(String url, String owner, LeaseStore store, List<Integer> seen) {
    Listener<Map<String, Object>> l = Listener.builder(
            PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build(), store)
        .group("g")
        .owner(owner)
        .partitions(1)
        .leaseDuration(Duration.ofSeconds(30))
        .renewInterval(Duration.ofSeconds(10))
        .acquireInterval(Duration.ofSeconds(60))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(10, Duration.ofMillis(200)))
        .handler((change, fence) -> seen.add((Integer) change.document().get("n")))
        .build();
    listeners.add(l);
    return l.start();
  }

  /** Passes every call on to {@code store}; tests override what they observe. */
  private static class ForwardingLeaseStore implements LeaseStore {
    private final LeaseStore store;

    ForwardingLeaseStore(LeaseStore store) {
      this.store = store;
    }

    @Override
    public java.util.Optional<dev.sluice.lease.Lease> tryAcquire(String name, String owner, Duration duration) {
      return store.tryAcquire(name, owner, duration);
    }

    @Override
    public dev.sluice.lease.Lease renew(dev.sluice.lease.Lease lease, Duration duration) {
      return store.renew(lease, duration);
    }

    @Override
    public dev.sluice.lease.Lease commit(dev.sluice.lease.Lease lease, dev.sluice.feed.Position checkpoint) {
      return store.commit(lease, checkpoint);
    }

    @Override
    public boolean release(dev.sluice.lease.Lease lease) {
      return store.release(lease);
    }

    @Override
    public java.util.Optional<dev.sluice.lease.LeaseRecord> read(String name) {
      return store.read(name);
    }

    @Override
    public List<dev.sluice.lease.LeaseRecord> list(String prefix) {
      return store.list(prefix);
    }

    @Override
    public java.time.Instant now() {
      return store.now();
    }

    @Override
    public boolean delete(dev.sluice.lease.Lease lease) {
      return store.delete(lease);
    }

    @Override
    public boolean deleteIfIdle(String name, long epoch) {
      return store.deleteIfIdle(name, epoch);
    }

    @Override
    public AutoCloseable watchReleases(String prefix, java.util.function.Consumer<String> released) {
      return store.watchReleases(prefix, released);
    }
  }

  @Test
  void aTransactionOf100000RowsIsCheckpointedInsideItAndAHandOverResumesAtTheNextRow() throws Exception {
    Orders orders = ordersDatabase();
    String url = orders.url();
    DataSource ds = orders.ds();
    int rows = 100_000;
    java.util.concurrent.atomic.AtomicIntegerArray counts = new java.util.concurrent.atomic.AtomicIntegerArray(rows);
    AtomicInteger delivered = new AtomicInteger();
    List<Integer> sink = new java.util.AbstractList<>() {
      @Override
      public boolean add(Integer n) {
        counts.incrementAndGet(n);
        delivered.incrementAndGet();
        return true;
      }

      @Override
      public Integer get(int index) {
        throw new UnsupportedOperationException();
      }

      @Override
      public int size() {
        return delivered.get();
      }
    };
    CheckpointPolicy every1000 = CheckpointPolicy.every(1000, Duration.ofMillis(500));
    Listener<Map<String, Object>> first = listener(url, "g", "a", 1, BootstrapPolicy.oldest(), every1000, sink);
    await().atMost(Duration.ofSeconds(30)).until(() -> first.status().get(0).committed() != null);
    sql(ds, "INSERT INTO orders SELECT g, g FROM generate_series(0, " + (rows - 1) + ") g");
    await().atMost(Duration.ofSeconds(120)).until(() -> delivered.get() >= 40_000);
    first.close();
    listeners.remove(first);
    String handedOver = first.status().get(0).committed().token();
    assertThat(handedOver).as("the checkpoint handed over lies inside the transaction").contains("xid=");
    int before = delivered.get();
    assertThat(before).isLessThan(rows);

    Listener<Map<String, Object>> second = listener(url, "g", "b", 1, BootstrapPolicy.oldest(), every1000, sink);
    await().atMost(Duration.ofSeconds(180)).until(() -> delivered.get() >= rows);
    await().atMost(Duration.ofSeconds(10)).until(() -> second.status().get(0).processed() == rows - before);
    for (int i = 0; i < rows; i++) {
      assertThat(counts.get(i)).as("row %d", i).isEqualTo(1);
    }
  }

  /**
   * SIGSTOP of the JVM that owns the partition: its replication connection stays open, so the
   * server still counts its slot as in use (until wal_sender_timeout, 60 s by default). The next
   * owner, holding the lease, ends the frozen reader's session and reads on within seconds; the
   * frozen JVM, resumed, finds its lease and its slot gone and commits nothing.
   */
  @Test
  void aFrozenOwnersSlotIsTakenOverByTheNextOwnerWithinSecondsNotAtTheWalSenderTimeout() throws Exception {
    Orders orders = ordersDatabase();
    String url = orders.url();
    DataSource ds = orders.ds();
    sql(ds, "CREATE TABLE deliveries (n int, node text)");
    ChildJvm first = ChildJvm.start("first", PgRecordingNode.class, url, "first", "1");
    children.add(first);
    first.awaitLine(l -> l.contains("bootstrapped at"), Duration.ofSeconds(60));
    insertEach(ds, 0, 50);
    await().atMost(Duration.ofSeconds(30)).until(() -> delivered(ds).keySet().containsAll(range(0, 50)));
    first.pause();
    ChildJvm second = ChildJvm.start("second", PgRecordingNode.class, url, "second", "1");
    children.add(second);
    second.awaitLine(l -> l.startsWith("ACQUIRED second"), Duration.ofSeconds(30));
    insertEach(ds, 50, 100);
    await().atMost(Duration.ofSeconds(20)).until(() -> delivered(ds).keySet().containsAll(range(50, 100)));
    first.resume();
    insertEach(ds, 100, 150);
    await().atMost(Duration.ofSeconds(30)).until(() -> delivered(ds).keySet().equals(range(0, 150)));
    Map<Integer, Integer> counts = delivered(ds);
    assertThat(counts.values()).as("at most twice").allMatch(c -> c <= 2);
    try (Connection c = ds.getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT count(*) FROM deliveries WHERE node = 'first' AND n >= 50")) {
      rs.next();
      assertThat(rs.getInt(1)).as("the frozen owner delivered nothing written after it froze").isZero();
    }
  }

  @Test
  void killMinus9OfThePostgresServerMidStreamLosesNothing() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("pgcrash");
      String url = pg.jdbcUrl(db);
      DataSource ds = simple(url);
      sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders");
      List<Integer> seen = new CopyOnWriteArrayList<>();
      Listener<Map<String, Object>> l = listener(url, "a", 1, seen);
      await().atMost(Duration.ofSeconds(30)).until(() -> l.status().get(0).committed() != null);
      insertEach(ds, 0, 50);
      await().atMost(Duration.ofSeconds(60)).until(() -> new HashSet<>(seen).containsAll(range(0, 30)));
      pg.crashAndRestart();
      sql(ds, "BEGIN; " + inserts(50, 120) + " COMMIT");
      await().atMost(Duration.ofSeconds(120)).until(() -> new HashSet<>(seen).equals(range(0, 120)));
    }
  }

  /**
   * An idle partition on a busy server: its checkpoint follows the server's position through
   * heartbeats, the slot confirms no more than the checkpoint, and the next owner takes it over
   * without a false "history lost" (before, pgjdbc confirmed the server's position on its own while
   * idle, the slot moved past the checkpoint, and the hand-over failed the partition).
   */
  @Test
  void anIdlePartitionOnABusyServerAdvancesItsCheckpointAndHandsOverWithoutLostHistory() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start(Map.of("wal_sender_timeout", "2s"))) {
      String db = pg.createDatabase("pgidle");
      String url = pg.jdbcUrl(db);
      DataSource ds = simple(url);
      sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders",
          "CREATE TABLE busy (id serial PRIMARY KEY, pad text)");
      List<Integer> seen = new CopyOnWriteArrayList<>();
      CheckpointPolicy heartbeats = CheckpointPolicy.every(10, Duration.ofMillis(200)).withHeartbeat(Duration.ofMillis(500));
      Listener<Map<String, Object>> first = listener(url, "g", "a", 1, BootstrapPolicy.oldest(), heartbeats, seen);
      await().atMost(Duration.ofSeconds(30)).until(() -> first.status().get(0).committed() != null);
      String start = first.status().get(0).committed().token();
      String slot = "sluice_pgidle_g_public_orders_0of1";
      // Another, unpublished table keeps the server writing WAL; the server's keep-alives carry it.
      await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200)).until(() -> {
        sql(ds, "INSERT INTO busy (pad) SELECT repeat('x', 100) FROM generate_series(1, 100)");
        String now = first.status().get(0).committed().token();
        return lsn(ds, "'" + now + "'::pg_lsn - '" + start + "'::pg_lsn") > 0;
      });
      assertThat(lsn(ds, "(SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '" + slot + "')"
          + " - '" + first.status().get(0).committed().token() + "'::pg_lsn"))
          .as("the slot confirms no more than the committed checkpoint").isLessThanOrEqualTo(0);
      first.close();
      listeners.remove(first);

      Listener<Map<String, Object>> second = listener(url, "g", "b", 1, BootstrapPolicy.oldest(), heartbeats, seen);
      await().atMost(Duration.ofSeconds(30)).until(() -> second.status().get(0).committed() != null
          && second.status().get(0).state() == PartitionState.ACTIVE);
      insertEach(ds, 0, 10);
      await().atMost(Duration.ofSeconds(30)).until(() -> new HashSet<>(seen).equals(range(0, 10)));
      assertThat(second.status().get(0).state()).isEqualTo(PartitionState.ACTIVE);
      assertThat(second.status().get(0).error()).isNull();
    }
  }

  private static long lsn(DataSource ds, String expression) throws SQLException {
    try (Connection c = ds.getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT (" + expression + ")::bigint")) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /**
   * A handler that takes longer than the server's wal_sender_timeout (2 s here) does not cost the
   * replication connection: the feed tells the server it is alive while nobody reads.
   */
  @Test
  void aHandlerSlowerThanTheWalSenderTimeoutKeepsItsReplicationConnection() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("pgslow");
      String url = pg.jdbcUrl(db);
      DataSource ds = simple(url);
      sql(ds, "ALTER SYSTEM SET wal_sender_timeout = '2s'", "SELECT pg_reload_conf()",
          "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders");
      java.util.concurrent.CountDownLatch entered = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
      AtomicInteger feedFailures = new AtomicInteger();
      List<Integer> seen = new CopyOnWriteArrayList<>();
      Listener<Map<String, Object>> l = Listener.builder(
              PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders")
                  .statusInterval(Duration.ofMillis(500)).build(),
              SqlLeaseStore.builder(ds).build())
          .group("g").owner("slow").leaseDuration(Duration.ofSeconds(30))
          .bootstrap(BootstrapPolicy.oldest())
          .handler((change, fence) -> {
            int n = (Integer) change.document().get("n");
            if (n == 0) {
              entered.countDown();
              release.await(60, java.util.concurrent.TimeUnit.SECONDS);
            }
            seen.add(n);
          })
          .observer(new dev.sluice.listener.ListenerObserver() {
            @Override
            public void feedFailed(String lease, Throwable error) {
              feedFailures.incrementAndGet();
            }
          })
          .build();
      listeners.add(l);
      l.start();
      await().atMost(Duration.ofSeconds(30)).until(() -> l.status().get(0).committed() != null);
      sql(ds, "INSERT INTO orders VALUES (0, 0)");
      assertThat(entered.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
      int pid = activePid(ds);
      assertThat(pid).as("the slot is read").isPositive();
      await().during(Duration.ofSeconds(8)).atMost(Duration.ofSeconds(10))
          .until(() -> activePid(ds) == pid);
      release.countDown();
      sql(ds, "INSERT INTO orders VALUES (1, 1)");
      await().atMost(Duration.ofSeconds(30)).until(() -> seen.contains(1));
      assertThat(seen).containsExactly(0, 1);
      assertThat(feedFailures.get()).as("the replication connection never failed").isZero();
    }
  }

  /** The process id of the walsender reading the listener's slot, or 0 when none does. */
  private static int activePid(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT coalesce(max(active_pid), 0) FROM pg_replication_slots"
            + " WHERE slot_name LIKE 'sluice_pgslow_%'")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  private static Map<Integer, Integer> delivered(DataSource ds) throws SQLException {
    Map<Integer, Integer> counts = new HashMap<>();
    try (Connection c = ds.getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT n, count(*) FROM deliveries GROUP BY n")) {
      while (rs.next()) {
        counts.put(rs.getInt(1), rs.getInt(2));
      }
    }
    return counts;
  }
}
