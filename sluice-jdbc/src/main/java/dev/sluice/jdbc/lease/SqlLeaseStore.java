package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseCallBounds;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
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

  // The parts, one concern each (package-info lists them).
  private final LeaseTable table;
  /** The network timeouts of its calls (ADR 0101), from {@link Builder#operationTimeout}. */
  private final LeaseCallBounds bounds;
  private final LeaseCalls calls;
  private final CasTransactions cas;
  private final LeaseStatements statements;
  private final ReleaseNotices notices;
  private final AcquireStrategy upsertAcquire;
  private final AcquireStrategy readThenWriteAcquire;
  /** Tests only: the read-then-write acquisition also where the server has the upsert. */
  private final boolean forceReadThenWrite;

  private SqlLeaseStore(Builder b) {
    this.table = new LeaseTable(b.table, b.createTable, b.dialect == null ? null : b.dialect.sql);
    this.bounds = new LeaseCallBounds(b.operationTimeout);
    this.calls = new LeaseCalls(b.dataSource, table, bounds.operationTimeoutMillis());
    this.cas = new CasTransactions(calls);
    this.notices = new ReleaseNotices(b.dataSource, b.table);
    this.statements = new LeaseStatements(b.table, notices);
    this.upsertAcquire = new UpsertAcquire(calls, b.table);
    this.readThenWriteAcquire = new ReadThenWriteAcquire(statements, cas);
    this.forceReadThenWrite = b.readThenWriteAcquire;
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
    Boolean upsert = table.upsertReturning();
    if (upsert == null) {
      upsert = calls.call("tryAcquire", name, bound, (c, d) -> table.upsertReturning());
    }
    AcquireStrategy strategy = forceReadThenWrite || !upsert ? readThenWriteAcquire : upsertAcquire;
    Optional<Lease> lease = strategy.acquire(name, owner, duration, bound);
    lease.ifPresent(l -> bounds.granted(name, duration));
    return lease;
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    requireDuration(duration);
    Lease renewed = cas.fencedWrite("renew", lease, bounds.forLease(duration), (c, d) -> {
      LeaseStatements.Row row = statements.selectMatching(c, d, lease);
      Instant expiresAt = LeaseStatements.expiry(row.now(), duration);
      statements.casUpdate(c, "expires_at = ?", row, ps -> {
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
    return cas.fencedWrite("commit", lease, bounds.forHeld(lease.name()), (c, d) -> {
      LeaseStatements.Row row = statements.selectMatching(c, d, lease);
      statements.casUpdate(c, "checkpoint = ?, checkpoint_time = ?", row, ps -> {
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
    boolean released = calls.call("release", lease.name(), bounds.forHeld(lease.name()),
        (c, d) -> statements.release(c, d, lease));
    // Another holder of the name in this process (rare) falls back to the operation timeout.
    bounds.released(lease.name());
    return released;
  }

  /**
   * Release notices on PostgreSQL with its JDBC driver: {@code LISTEN} on the table's channel,
   * which releases and deletions notify (above), on one pooled connection held while the watch
   * runs. On MariaDB/MySQL (no notifications) nothing is watched: peers take released partitions at
   * their next attempt. Where the database is not known yet and cannot be reached now, the watch
   * keeps trying in the background and ends quietly if it turns out not to be PostgreSQL.
   */
  @Override
  public AutoCloseable watchReleases(String prefix, Consumer<String> released) {
    ConfigurationException.requireNonNull(prefix, "prefix");
    ConfigurationException.requireNonNull(released, "released");
    return notices.watch(table.knownDialect(), prefix, released);
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
    String name = lease.name();
    requireName(name);
    return calls.call("delete", name, (c, d) -> statements.deleteWhere(c, d, name,
        x -> "owner = ? AND epoch = ?", (ps, i) -> {
          ps.setString(i, lease.owner());
          ps.setLong(i + 1, lease.epoch());
          return i + 2;
        }));
  }

  /**
   * One conditional {@code DELETE}: epoch still the one given, nobody holding it on the
   * database's clock. An acquisition always changes the epoch, so one that committed between the
   * caller's read and this statement makes it match nothing; one still in flight loses its
   * compare-and-swap and returns empty.
   */
  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    requireName(name);
    return calls.call("deleteIfIdle", name, (c, d) -> statements.deleteWhere(c, d, name,
        x -> "epoch = ? AND (owner IS NULL OR expires_at IS NULL OR expires_at <= " + x.now + ")",
        (ps, i) -> {
          ps.setLong(i, epoch);
          return i + 1;
        }));
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    return calls.call("read", name, (c, d) -> {
      LeaseStatements.Row row = statements.select(c, d, name);
      return row.name() == null ? Optional.<LeaseRecord>empty() : Optional.of(row.toRecord());
    });
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    ConfigurationException.requireNonNull(prefix, "prefix");
    String pattern = prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%";
    List<LeaseRecord> records = calls.call("list", prefix + "*",
        (c, d) -> statements.list(c, d, pattern));
    // Sorted here: the databases' collations disagree on order; Java's is the contract's.
    records.sort(Comparator.comparing(LeaseRecord::name));
    return records;
  }

  @Override
  public Instant now() {
    return calls.call("now", null, LeaseStatements::now);
  }

  @Override
  public String toString() {
    return "SqlLeaseStore[" + table.name() + ", " + table.knownDialect() + "]";
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
