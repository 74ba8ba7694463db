package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseCallBounds;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executor;
import java.util.function.Function;
import java.util.regex.Pattern;
import javax.sql.DataSource;

/**
 * {@link LeaseStore} on PostgreSQL or MariaDB/MySQL: one row per lease, taken with one upsert that
 * returns the row (ADR 0072) or, on servers without one, the compare-and-swap of {@code seeds/002}
 * under REPEATABLE READ (read the row, update it only if its {@code version} and {@code epoch} are
 * still the ones read, commit; zero rows, a serialization failure (also at commit) or a lost insert
 * race all mean "not acquired"), which renewals and checkpoint commits always use. Expiry is
 * judged with the database's clock ({@code now()} / {@code UTC_TIMESTAMP(6)}), never the JVM's. Epochs are seeded from that
 * clock in microseconds ({@code max(epoch + 1, clock)} per acquisition), so they stay strictly
 * increasing also after a row was deleted and re-created. Failures other than contention are
 * {@link LeaseStoreException}s, retryable or not by SQLSTATE. See
 * {@code docs/adr/0021-sql-lease-compare-and-swap.md} and the DDL in {@code postgresql.sql} /
 * {@code mariadb.sql} next to this class (run on first use).
 *
 * <pre>{@code
 * LeaseStore store = SqlLeaseStore.builder(dataSource).table("sluice_lease").build();
 * }</pre>
 *
 * <p>On PostgreSQL (with its JDBC driver) releases and deletions notify a channel of the table,
 * and {@link #watchReleases} listens on it, so a standby takes a gracefully released partition at
 * once (ADR 0061); each watch holds one connection of the pool while it runs.
 *
 * <p>Thread-safe; borrows one connection per operation, so give it a pooled DataSource.
 */
public final class SqlLeaseStore implements LeaseStore {
  private static final Pattern TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}"
      + "(\\.[A-Za-z_][A-Za-z0-9_]{0,62})?");
  /** Bounded: only our own concurrent commit/renew can make a held row's CAS fail. */
  private static final int FENCED_WRITE_ATTEMPTS = 10;
  private static final String COLUMNS =
      "t.name, t.owner, t.epoch, t.expires_at, t.version, t.checkpoint, t.checkpoint_time";

  /** Which SQL database the store talks to. */
  public enum Dialect {
    POSTGRESQL(SqlDialect.POSTGRESQL),
    /** MariaDB and MySQL with InnoDB. */
    MARIADB(SqlDialect.MARIADB);

    private final SqlDialect sql;

    Dialect(SqlDialect sql) {
      this.sql = sql;
    }
  }

  private final DataSource dataSource;
  private final String table;
  private final boolean createTable;
  /** The network timeouts of its calls (ADR 0101), from {@link Builder#operationTimeout}. */
  private final LeaseCallBounds bounds;
  private final boolean readThenWriteAcquire;
  private volatile SqlDialect dialect;
  private volatile boolean tableReady;
  /** Whether the server takes a lease in one upsert with RETURNING (ADR 0072); null: not asked yet. */
  private volatile Boolean upsertReturning;

  /** The channel releases and deletions notify on PostgreSQL (release notices, ADR 0061). */
  private final String releaseChannel;

  private SqlLeaseStore(Builder b) {
    this.dataSource = b.dataSource;
    this.table = b.table;
    this.releaseChannel = releaseChannel(b.table);
    this.createTable = b.createTable;
    this.readThenWriteAcquire = b.readThenWriteAcquire;
    this.dialect = b.dialect == null ? null : b.dialect.sql;
    this.bounds = new LeaseCallBounds(b.operationTimeout);
  }

  /** Default of {@link Builder#operationTimeout}. */
  public static final Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(10);

  /** Starts configuring a store over {@code dataSource} (pooled, please). */
  public static Builder builder(DataSource dataSource) {
    return new Builder(ConfigurationException.requireNonNull(dataSource, "dataSource"));
  }

  /** Configuration of a {@link SqlLeaseStore}. */
  public static final class Builder {
    private final DataSource dataSource;
    private String table = "sluice_lease";
    private Dialect dialect;
    private boolean createTable = true;
    private boolean readThenWriteAcquire;
    private Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;

    private Builder(DataSource dataSource) {
      this.dataSource = dataSource;
    }

    /** Table name, optionally schema-qualified; default {@code sluice_lease}. */
    public Builder table(String table) {
      ConfigurationException.requireNonNull(table, "table");
      ConfigurationException.require(TABLE.matcher(table).matches(), "table", "'" + table + "'",
          "must be an unquoted SQL identifier, optionally schema-qualified");
      this.table = table;
      return this;
    }

    /** The database; default: detected from the connection's metadata on first use. */
    public Builder dialect(Dialect dialect) {
      this.dialect = ConfigurationException.requireNonNull(dialect, "dialect");
      return this;
    }

    /**
     * Whether to run {@code CREATE TABLE IF NOT EXISTS} on first use (default true). Turn off
     * where the application's database user may not create tables; then run the documented DDL.
     */
    public Builder createTable(boolean createTable) {
      this.createTable = createTable;
      return this;
    }

    /**
     * How long the store waits for the database to answer one request on a connection (the JDBC
     * network timeout, {@code Connection.setNetworkTimeout}, set for the call and restored
     * after); default 10 s. Calls made for a held lease (renew, commit, release) wait at most
     * a third of that lease (but at least one second) when that is shorter, so a renewal stuck
     * on a connection nobody answers fails in time for the next one to try a fresh connection
     * before the holder's local deadline (docs/adr/0101-lease-store-calls-bounded-by-the-lease.md).
     * A driver that times out a request closes its connection. A shorter timeout the connection already has is kept.
     * Obtaining the connection is bounded by the DataSource (a pool's connection timeout, the
     * driver's connect and login timeouts): configure those as well.
     */
    public Builder operationTimeout(Duration timeout) {
      ConfigurationException.requireNonNull(timeout, "operationTimeout");
      ConfigurationException.require(!timeout.isNegative() && timeout.toMillis() >= 1
          && timeout.toMillis() <= Integer.MAX_VALUE, "operationTimeout", timeout,
          "must be at least 1 ms and at most " + Integer.MAX_VALUE + " ms");
      this.operationTimeout = timeout;
      return this;
    }

    /**
     * Tests only: acquire with the read-then-write transaction that servers without an upsert
     * with RETURNING (MySQL, MariaDB before 10.5) use, also where the server has one.
     */
    Builder readThenWriteAcquire() {
      this.readThenWriteAcquire = true;
      return this;
    }

    public SqlLeaseStore build() {
      return new SqlLeaseStore(this);
    }
  }

  private record Row(String name, String owner, long epoch, Instant expiresAt, long version,
      Position checkpoint, Instant now) {
    boolean heldBySomeoneAt() {
      return owner != null && expiresAt != null && expiresAt.isAfter(now);
    }

    boolean matches(Lease lease) {
      return lease.owner().equals(owner) && lease.epoch() == epoch;
    }

    LeaseRecord toRecord() {
      return new LeaseRecord(name, owner, epoch, expiresAt, checkpoint, now);
    }
  }

  @FunctionalInterface
  private interface Tx<T> {
    T run(Connection c, SqlDialect d) throws SQLException;
  }

  /** Thrown inside a transaction to roll back and report "did not win the CAS". */
  private static final class CasFailed extends Exception {
    private static final long serialVersionUID = 1L;

    CasFailed() {
      super(null, null, false, false);
    }
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * One statement where the server has an upsert with RETURNING (PostgreSQL; MariaDB 10.5 and
   * later): an insert, or an update of the existing row only if it is free, expired or this
   * owner's, judged on the row as it is when the statement locks it (ADR 0072). Elsewhere (MySQL)
   * the read-then-write transaction of seed 002.
   */
  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    requireName(name);
    ConfigurationException.requireNonNull(owner, "owner");
    requireDuration(duration);
    // An acquisition holds nothing yet: the operation timeout, not a third of the lease (ADR 0101).
    long bound = bounds.operationTimeoutMillis();
    Boolean upsert = upsertReturning;
    if (upsert == null) {
      upsert = query("tryAcquire", name, bound, (c, d) -> upsertReturning);
    }
    Optional<Lease> lease = readThenWriteAcquire || !upsert
        ? readThenWriteAcquire(name, owner, duration, bound)
        : query("tryAcquire", name, bound, (c, d) -> upsertAcquire(c, d, name, owner, duration));
    lease.ifPresent(l -> bounds.granted(name, duration));
    return lease;
  }



  /** The upsert; empty if someone else holds the lease or won the statement's race. */
  private Optional<Lease> upsertAcquire(Connection c, SqlDialect d, String name, String owner,
      Duration duration) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(d.acquireStatement(table))) {
      ps.setString(1, name);
      ps.setString(2, owner);
      ps.setLong(3, durationMicros(duration));
      Optional<Lease> lease = Optional.empty();
      try (ResultSet rs = ps.executeQuery()) {
        // No row (PostgreSQL's ON CONFLICT ... WHERE false) or the row unchanged, someone else's
        // (MariaDB's ON DUPLICATE KEY UPDATE, whose IF()s keep every column): not acquired.
        if (rs.next() && owner.equals(rs.getString(1))) {
          String token = rs.getString(4);
          lease = Optional.of(new Lease(name, owner, rs.getLong(2), d.getTime(rs, 3),
              token == null ? null : new Position(token, d.getTime(rs, 5))));
        }
      }
      if (!c.getAutoCommit()) {
        c.commit();
      }
      return lease;
    } catch (SQLException e) {
      if (!c.getAutoCommit()) {
        rollbackQuietly(c);
      }
      if (d.isConcurrentUpdate(e) || d.isDuplicateKey(e)) {
        return Optional.empty();
      }
      throw e;
    }
  }

  private static long durationMicros(Duration duration) {
    try {
      return Math.addExact(Math.multiplyExact(duration.getSeconds(), 1_000_000L),
          duration.getNano() / 1_000);
    } catch (ArithmeticException e) {
      throw new ConfigurationException("duration " + duration + " is too long for the lease table");
    }
  }

  private Optional<Lease> readThenWriteAcquire(String name, String owner, Duration duration,
      long bound) {
    try {
      return Optional.of(casTransaction("tryAcquire", name, bound, (c, d) -> {
        Row row = select(c, d, name);
        Instant expiresAt = expiry(row.now(), duration);
        // Epochs are seeded from the database's clock in microseconds, so that a row deleted
        // and re-created (deleteIfIdle, an operator's DELETE) continues above every epoch it
        // granted before; max() keeps them increasing if the clock steps back meanwhile.
        long seed = micros(row.now());
        if (row.name() == null) {
          try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table
              + " (name, owner, epoch, expires_at, version, checkpoint, checkpoint_time)"
              + " VALUES (?, ?, ?, ?, 1, NULL, NULL)")) {
            ps.setString(1, name);
            ps.setString(2, owner);
            ps.setLong(3, seed);
            d.setTime(ps, 4, expiresAt);
            ps.executeUpdate();
          }
          return new Lease(name, owner, seed, expiresAt, null);
        }
        if (row.heldBySomeoneAt() && !owner.equals(row.owner())) {
          return null;
        }
        long epoch = Math.max(Math.addExact(row.epoch(), 1), seed);
        casUpdate(c, "owner = ?, epoch = ?, expires_at = ?", row, ps -> {
          ps.setString(1, owner);
          ps.setLong(2, epoch);
          d.setTime(ps, 3, expiresAt);
          return 4;
        });
        return new Lease(name, owner, epoch, expiresAt, row.checkpoint());
      }));
    } catch (CasFailed e) {
      return Optional.empty();
    }
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    requireDuration(duration);
    Lease renewed = fencedWrite("renew", lease, bounds.forLease(duration), (c, d) -> {
      Row row = selectMatching(c, d, lease);
      Instant expiresAt = expiry(row.now(), duration);
      casUpdate(c, "expires_at = ?", row, ps -> {
        d.setTime(ps, 1, expiresAt);
        return 2;
      });
      return new Lease(lease.name(), lease.owner(), lease.epoch(), expiresAt, row.checkpoint());
    });
    bounds.granted(lease.name(), duration);
    return renewed;
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    ConfigurationException.requireNonNull(checkpoint, "checkpoint");
    Position stored = new Position(checkpoint.token(),
        checkpoint.time() == null ? null : checkpoint.time().truncatedTo(ChronoUnit.MICROS));
    ConfigurationException.requireNonNull(lease, "lease");
    return fencedWrite("commit", lease, bounds.forHeld(lease.name()), (c, d) -> {
      Row row = selectMatching(c, d, lease);
      casUpdate(c, "checkpoint = ?, checkpoint_time = ?", row, ps -> {
        ps.setString(1, stored.token());
        d.setTime(ps, 2, stored.time());
        return 3;
      });
      return new Lease(lease.name(), lease.owner(), lease.epoch(), row.expiresAt(), stored);
    });
  }

  /**
   * One conditional {@code UPDATE} on owner and epoch (every acquisition changes the epoch, so a
   * release after a takeover matches nothing); keeps epoch and checkpoint for the next holder.
   */
  @Override
  public boolean release(Lease lease) {
    ConfigurationException.requireNonNull(lease, "lease");
    boolean released = query("release", lease.name(), bounds.forHeld(lease.name()), (c, d) -> {
      try (PreparedStatement ps = c.prepareStatement(notifying(d, "UPDATE " + table + " SET owner = NULL,"
          + " expires_at = NULL, version = version + 1 WHERE name = ? AND owner = ? AND epoch = ?"))) {
        ps.setString(1, lease.name());
        ps.setString(2, lease.owner());
        ps.setLong(3, lease.epoch());
        return changedAndCommitted(c, d, ps, 4) == 1;
      }
    });
    // Another holder of the name in this process (rare) falls back to the operation timeout.
    bounds.released(lease.name());
    return released;
  }

  /**
   * {@code write} (an UPDATE or DELETE of one row by name) as it runs on {@code d}: on PostgreSQL
   * it also notifies {@link #releaseChannel} with the row's name, in the same statement, so the
   * notice goes out when the change commits and only if a row changed; its one extra parameter is
   * the channel. Elsewhere {@code write} as it is.
   */
  private String notifying(SqlDialect d, String write) {
    return d == SqlDialect.POSTGRESQL
        ? "WITH changed AS (" + write + " RETURNING name) SELECT pg_notify(?, name) FROM changed"
        : write;
  }

  /** Runs a statement {@link #notifying} made, commits, and returns how many rows it changed. */
  private int changedAndCommitted(Connection c, SqlDialect d, PreparedStatement ps, int channelIndex)
      throws SQLException {
    int changed;
    if (d == SqlDialect.POSTGRESQL) {
      ps.setString(channelIndex, releaseChannel);
      changed = 0;
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          changed++;
        }
      }
    } else {
      changed = ps.executeUpdate();
    }
    if (!c.getAutoCommit()) {
      c.commit();
    }
    return changed;
  }

  /**
   * The notification channel of {@code table}: one per table (unquoted names fold to lower case,
   * so both spellings are one table and one channel), within PostgreSQL's 63 bytes.
   */
  static String releaseChannel(String table) {
    String channel = "sluice_release." + table.toLowerCase(java.util.Locale.ROOT);
    if (channel.length() <= 63) {
      return channel;
    }
    String digest = java.util.UUID.nameUUIDFromBytes(channel.getBytes(java.nio.charset.StandardCharsets.UTF_8))
        .toString().replace("-", "");
    return channel.substring(0, 46) + "." + digest.substring(0, 16);
  }

  /**
   * Release notices on PostgreSQL with its JDBC driver: {@code LISTEN} on the table's channel,
   * which releases and deletions notify (above), on one pooled connection held while the watch
   * runs. On MariaDB/MySQL (no notifications) nothing is watched: peers take released partitions at
   * their next attempt. Where the database is not known yet and cannot be reached now, the watch
   * keeps trying in the background and ends quietly if it turns out not to be PostgreSQL.
   */
  @Override
  public AutoCloseable watchReleases(String prefix, java.util.function.Consumer<String> released) {
    ConfigurationException.requireNonNull(prefix, "prefix");
    ConfigurationException.requireNonNull(released, "released");
    SqlDialect d = dialect;
    if (d != null && d != SqlDialect.POSTGRESQL || !pgJdbcPresent()) {
      return () -> { };
    }
    PostgresReleaseWatch watch = new PostgresReleaseWatch(dataSource, releaseChannel, prefix, released).start();
    return watch == null ? () -> { } : watch;
  }

  private static boolean pgJdbcPresent() {
    try {
      Class.forName("org.postgresql.PGConnection", false, SqlLeaseStore.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  /**
   * One conditional {@code DELETE} on owner and epoch. Like {@link #deleteIfIdle}, it also
   * requires the row's epoch to be below the database clock in microseconds, so that the epoch a
   * re-created row starts with is above it; only a database clock that stepped back can make
   * this refuse (false).
   */
  @Override
  public boolean delete(Lease lease) {
    ConfigurationException.requireNonNull(lease, "lease");
    return deleteWhere("delete", lease.name(), d -> "owner = ? AND epoch = ?", (ps, i) -> {
      ps.setString(i, lease.owner());
      ps.setLong(i + 1, lease.epoch());
      return i + 2;
    });
  }

  /**
   * One conditional {@code DELETE}: epoch still the one given, nobody holding it on the
   * database's clock. An acquisition always changes the epoch, so one that committed between the
   * caller's read and this statement makes it match nothing; one still in flight loses its
   * compare-and-swap and returns empty.
   */
  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    return deleteWhere("deleteIfIdle", name, d -> "epoch = ? AND (owner IS NULL"
        + " OR expires_at IS NULL OR expires_at <= " + d.now + ")", (ps, i) -> {
          ps.setLong(i, epoch);
          return i + 1;
        });
  }

  @FunctionalInterface
  private interface WhereBinder {
    /** Binds the condition's parameters from {@code firstIndex} on; returns the next free index. */
    int bind(PreparedStatement ps, int firstIndex) throws SQLException;
  }

  private boolean deleteWhere(String op, String name, Function<SqlDialect, String> condition,
      WhereBinder binder) {
    requireName(name);
    return query(op, name, (c, d) -> {
      try (PreparedStatement ps = c.prepareStatement(notifying(d, "DELETE FROM " + table + " WHERE name = ?"
          + " AND epoch < " + d.nowMicros + " AND " + condition.apply(d)))) {
        ps.setString(1, name);
        return changedAndCommitted(c, d, ps, binder.bind(ps, 2)) == 1;
      }
    });
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    return query("read", name, (c, d) -> {
      Row row = select(c, d, name);
      return row.name() == null ? Optional.<LeaseRecord>empty() : Optional.of(row.toRecord());
    });
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    ConfigurationException.requireNonNull(prefix, "prefix");
    String pattern = prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%";
    return query("list", prefix + "*", (c, d) -> {
      List<LeaseRecord> records = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement("SELECT " + COLUMNS + ", " + d.now
          + " FROM " + table + " t WHERE t.name LIKE ? ESCAPE '!'")) {
        ps.setString(1, pattern);
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            records.add(row(rs, d).toRecord());
          }
        }
      }
      // Sorted here: the databases' collations disagree on order; Java's is the contract's.
      records.sort(Comparator.comparing(LeaseRecord::name));
      return records;
    });
  }

  @Override
  public Instant now() {
    return query("now", null, (c, d) -> {
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT " + d.now)) {
        rs.next();
        return d.getTime(rs, 1);
      }
    });
  }

  @Override
  public String toString() {
    return "SqlLeaseStore[" + table + ", " + dialect + "]";
  }

  // ---------------------------------------------------------------------------------------------

  private static long micros(Instant dbNow) {
    return Math.addExact(Math.multiplyExact(dbNow.getEpochSecond(), 1_000_000L),
        dbNow.getNano() / 1_000);
  }

  private static Instant expiry(Instant dbNow, Duration duration) {
    // Truncated to what both databases store, so the lease we return equals the stored row.
    return dbNow.plus(duration).truncatedTo(ChronoUnit.MICROS);
  }

  /** The row (name null if absent) and the database's clock, in one round trip. */
  private Row select(Connection c, SqlDialect d, String name) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("SELECT " + COLUMNS + ", " + d.now
        + " FROM (SELECT 1 AS one) o LEFT JOIN " + table + " t ON t.name = ?")) {
      ps.setString(1, name);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return row(rs, d);
      }
    }
  }

  private static Row row(ResultSet rs, SqlDialect d) throws SQLException {
    String token = rs.getString(6);
    Position checkpoint = token == null ? null : new Position(token, d.getTime(rs, 7));
    return new Row(rs.getString(1), rs.getString(2), rs.getLong(3), d.getTime(rs, 4),
        rs.getLong(5), checkpoint, d.getTime(rs, 8));
  }

  /** The row if it is still this lease's (owner and epoch); otherwise the lease is lost. */
  private Row selectMatching(Connection c, SqlDialect d, Lease lease) throws SQLException {
    Row row = select(c, d, lease.name());
    if (row.name() == null) {
      throw new LeaseLostException(lease.name(), lease.epoch(), "no lease row");
    }
    if (!row.matches(lease)) {
      throw new LeaseLostException(lease.name(), lease.epoch(),
          row.owner() == null ? "released (now epoch " + row.epoch() + ")"
              : "now held by " + row.owner() + " with epoch " + row.epoch());
    }
    return row;
  }

  @FunctionalInterface
  private interface Binder {
    /** Binds the SET parameters and returns the index of the first WHERE parameter. */
    int bind(PreparedStatement ps) throws SQLException;
  }

  /**
   * The compare-and-swap: updates the row only if its version is still the one read in this
   * transaction. Under REPEATABLE READ, PostgreSQL raises a serialization failure if the row
   * changed since the snapshot; InnoDB re-reads the latest version for the UPDATE and matches
   * zero rows. Both mean someone else wrote first.
   */
  /**
   * Writes {@code row}'s record if it is still the one read: same version <em>and</em> epoch. The
   * version alone is not enough: a record deleted (deleteIfIdle, delete) and inserted again starts
   * at version 1 again, and MariaDB's UPDATE reads the newest committed row, not the
   * transaction's snapshot, so a CAS on version 1 would overwrite the new record of someone else;
   * the new record's epoch is always higher than the deleted one's.
   */
  private void casUpdate(Connection c, String set, Row row, Binder binder)
      throws SQLException, CasFailed {
    try (PreparedStatement ps = c.prepareStatement("UPDATE " + table + " SET " + set
        + ", version = version + 1 WHERE name = ? AND version = ? AND epoch = ?")) {
      int i = binder.bind(ps);
      ps.setString(i, row.name());
      ps.setLong(i + 1, row.version());
      ps.setLong(i + 2, row.epoch());
      if (ps.executeUpdate() != 1) {
        throw new CasFailed();
      }
    }
  }

  /** Renew/commit/release: retried while only the CAS (not owner or epoch) failed. */
  private <T> T fencedWrite(String op, Lease lease, long bound, CasTx<T> body) {
    ConfigurationException.requireNonNull(lease, "lease");
    for (int attempt = 1; ; attempt++) {
      try {
        return casTransaction(op, lease.name(), bound, body);
      } catch (CasFailed e) {
        if (attempt >= FENCED_WRITE_ATTEMPTS) {
          throw new LeaseStoreException("SqlLeaseStore " + op + " of '" + lease.name()
              + "' lost " + attempt + " compare-and-swap races in a row; giving up", true, null);
        }
      }
    }
  }

  @FunctionalInterface
  private interface CasTx<T> {
    T run(Connection c, SqlDialect d) throws SQLException, CasFailed;
  }

  /**
   * Runs {@code body} in a REPEATABLE READ transaction and commits. A null result, a failed CAS,
   * a lost insert race, a serialization failure or a failed commit roll back and throw CasFailed.
   */
  private <T> T casTransaction(String op, String name, long bound, CasTx<T> body) throws CasFailed {
    try (Connection c = dataSource.getConnection()) {
      int previousTimeout = limit(c, bound);
      try {
        return casTransaction(c, body);
      } finally {
        unlimit(c, previousTimeout);
      }
    } catch (SQLException e) {
      throw failure(op, name, e);
    }
  }

  private <T> T casTransaction(Connection c, CasTx<T> body) throws CasFailed, SQLException {
    SqlDialect d = ready(c);
    boolean autoCommit = c.getAutoCommit();
    int isolation = c.getTransactionIsolation();
    c.setAutoCommit(false);
    c.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
    try {
      d.guard(c);
      T result = body.run(c, d);
      if (result == null) {
        throw new CasFailed();
      }
      try {
        c.commit();
      } catch (SQLException e) {
        // Seed 002: a commit that fails because someone else changed the row first is a lost
        // race. Any other failure (connection lost, permission) is reported as such.
        if (d.isConcurrentUpdate(e) || d.isDuplicateKey(e)) {
          throw new CasFailed();
        }
        throw e;
      }
      return result;
    } catch (CasFailed | RuntimeException e) {
      rollbackQuietly(c);
      throw e;
    } catch (SQLException e) {
      rollbackQuietly(c);
      if (d.isDuplicateKey(e) || d.isConcurrentUpdate(e)) {
        throw new CasFailed();
      }
      throw e;
    } finally {
      restore(c, autoCommit, isolation);
    }
  }

  private <T> T query(String op, String name, Tx<T> body) {
    return query(op, name, bounds.operationTimeoutMillis(), body);
  }

  /** {@code body} on a connection whose requests wait at most {@code bound} ms for an answer. */
  private <T> T query(String op, String name, long bound, Tx<T> body) {
    try (Connection c = dataSource.getConnection()) {
      int previousTimeout = limit(c, bound);
      try {
        SqlDialect d = ready(c);
        return body.run(c, d);
      } finally {
        unlimit(c, previousTimeout);
      }
    } catch (SQLException e) {
      throw failure(op, name, e);
    }
  }

  /** Runs {@code setNetworkTimeout}'s work, if any, on the calling thread. */
  private static final Executor DIRECT = Runnable::run;

  /**
   * Sets the connection's network timeout to {@code boundMillis}, unless it already has a shorter
   * one; returns the one to restore. A driver without network timeouts is left as it is.
   */
  private static int limit(Connection c, long boundMillis) throws SQLException {
    int previous;
    try {
      previous = c.getNetworkTimeout();
    } catch (SQLFeatureNotSupportedException e) {
      return -1;
    }
    int bound = (int) Math.min(Integer.MAX_VALUE, boundMillis);
    if (previous == 0 || previous > bound) {
      c.setNetworkTimeout(DIRECT, bound);
    }
    return previous;
  }

  /** Gives the connection its own network timeout back (the pool's connection outlives the call). */
  private static void unlimit(Connection c, int previous) {
    if (previous < 0) {
      return;
    }
    try {
      if (!c.isClosed() && c.getNetworkTimeout() != previous) {
        c.setNetworkTimeout(DIRECT, previous);
      }
    } catch (SQLException | RuntimeException e) {
      // A connection that timed out is closed; the pool discards it.
    }
  }

  /** Retryable or not by SQLSTATE ({@link SqlFailures}), naming the operation and the cause. */
  private LeaseStoreException failure(String op, String name, SQLException e) {
    boolean retryable = SqlFailures.retryable(e);
    return new LeaseStoreException("SqlLeaseStore " + op
        + (name == null ? "" : " of '" + name + "'") + " on table " + table + " failed ("
        + (retryable ? "may succeed if retried" : "will not succeed until the database or its"
        + " configuration is fixed") + "): " + e.getMessage() + " (SQLState " + e.getSQLState()
        + ", error " + e.getErrorCode() + ")", retryable, e);
  }

  private static void rollbackQuietly(Connection c) {
    try {
      c.rollback();
    } catch (SQLException ignored) {
      // The connection is broken; closing it is all that is left to do.
    }
  }

  private static void restore(Connection c, boolean autoCommit, int isolation) {
    try {
      c.setTransactionIsolation(isolation);
      c.setAutoCommit(autoCommit);
    } catch (SQLException ignored) {
      // Broken connection: the pool discards it.
    }
  }

  /** Detects the dialect and creates the table, once. */
  private SqlDialect ready(Connection c) throws SQLException {
    SqlDialect d = dialect;
    if (d == null) {
      String product = c.getMetaData().getDatabaseProductName();
      d = SqlDialect.detect(product);
      if (d == null) {
        throw new ConfigurationException("SqlLeaseStore supports PostgreSQL and MariaDB/MySQL, "
            + "but the DataSource is " + product + "; set dialect(...) if it is compatible");
      }
      dialect = d;
    }
    if (upsertReturning == null) {
      upsertReturning = d.upsertReturning(c.getMetaData());
    }
    if (!tableReady && createTable) {
      createTable(c, d);
    }
    tableReady = true;
    return d;
  }

  private synchronized void createTable(Connection c, SqlDialect d) throws SQLException {
    if (tableReady) {
      return;
    }
    String ddl = d.ddl(table);
    try (Statement st = c.createStatement()) {
      st.execute(ddl);
    } catch (SQLException first) {
      // Two processes creating the table at once: PostgreSQL's IF NOT EXISTS can still fail
      // on its catalog's unique index. The table exists then; a second attempt proves it.
      try (Statement st = c.createStatement()) {
        st.execute(ddl);
      } catch (SQLException second) {
        second.addSuppressed(first);
        throw second;
      }
    }
    if (!c.getAutoCommit()) {
      c.commit();
    }
  }

  private static void requireName(String name) {
    ConfigurationException.requireNonNull(name, "name");
    ConfigurationException.require(!name.isBlank() && name.length() <= 255, "name",
        "'" + name + "'", "must be 1..255 characters, not blank");
  }

  private static void requireDuration(Duration duration) {
    ConfigurationException.requireNonNull(duration, "duration");
    ConfigurationException.require(duration.toMillis() >= 1, "duration", duration,
        "must be at least 1 ms");
  }

}
