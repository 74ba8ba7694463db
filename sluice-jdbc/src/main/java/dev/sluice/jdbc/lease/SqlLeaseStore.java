package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import java.time.Duration;
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
 * <p>With {@link Builder#sessionLiveness} (PostgreSQL, MariaDB 10.5 or later), a crashed holder's leases are taken by a
 * listener's standby within about that bound, instead of at their expiry, where the database sees
 * the holder's session end; a paused or cut-off holder is still fenced by its lease
 * (docs/adr/0114-sql-lease-holder-session-liveness.md). {@link #close()} such a store when done.
 *
 * <p>Thread-safe; borrows one connection per operation, so give it a pooled DataSource. The
 * implementation is the package-private {@code SqlLeaseStoreImpl}, built only by {@link Builder}
 * (ADR 0118).
 */
public interface SqlLeaseStore extends LeaseStore, AutoCloseable {

  /**
   * Stops confirming the store's liveness session, if it has one, and gives its connection back to
   * the DataSource: every lease granted with that session is then lost to its holder at once (a
   * pool keeps the session open, so standbys wait for those leases' expiry). Nothing else needs
   * closing; other calls keep working (leases granted afterwards are judged by their expiry alone).
   */
  @Override
  void close();

  /** Which SQL database the store talks to. */
  enum Dialect {
    POSTGRESQL(SqlDialect.POSTGRESQL),
    /** MariaDB and MySQL with InnoDB. */
    MARIADB(SqlDialect.MARIADB);

    final SqlDialect sql;

    Dialect(SqlDialect sql) {
      this.sql = sql;
    }
  }

  /** Default of {@link Builder#operationTimeout}. */
  Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(10);

  /** Starts configuring a store over {@code dataSource} (pooled, please). */
  static Builder builder(DataSource dataSource) {
    return new Builder(ConfigurationException.requireNonNull(dataSource, "dataSource"));
  }

  /** Configuration of a {@link SqlLeaseStore}. */
  final class Builder {
    private static final Pattern TABLE = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}"
        + "(\\.[A-Za-z_][A-Za-z0-9_]{0,62})?");

    final DataSource dataSource;
    String table = "sluice_lease";
    Dialect dialect;
    boolean createTable = true;
    boolean readThenWriteAcquire;
    Duration operationTimeout = DEFAULT_OPERATION_TIMEOUT;
    Duration sessionLiveness;

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
     * PostgreSQL, or MariaDB 10.5 and later; off by default: lets a standby take a crashed holder's lease within about
     * {@code bound} of the crash instead of at the lease's expiry (ADR 0114). The store keeps one
     * connection of the DataSource for its life as its liveness session, records that session in
     * each lease it grants, and confirms it alive every quarter of {@code bound}. A standby's
     * {@link #watchReleases} finds leases whose recorded session the server no longer has, and takes
     * one a bound (the holder's, recorded in the row) after it found its session gone (PostgreSQL:
     * the backend is no longer in {@code pg_stat_activity}; MariaDB: the named lock the session held
     * with {@code GET_LOCK} is free). The holder
     * stops acting on a lease when its session was not confirmed alive for {@code bound}, so by then
     * it has stopped, whether it crashed or only lost its session (a network cut the server noticed,
     * {@code pg_terminate_backend}, a database restart).
     *
     * <p>The price: a holder that cannot confirm its session for {@code bound} (a database restart or
     * failover, a network blip or a pause longer than the bound) gives up its leases, where without
     * the option it keeps them for up to a lease. A paused process keeps its session, so a paused or
     * cut-off holder is taken over at its lease's expiry only, as without the option. A database
     * restart does not make standbys take over early (sessions older than the server are not
     * counted as gone). Refused, when the store first reaches the database, on MySQL and on
     * MariaDB before 10.5 (no one-statement acquisition to extend). Needs the columns {@code holder_pid, holder_since, holder_bound_ms,
     * holder_epoch} (added on first use unless {@code createTable(false)}). Not behind a pooler in
     * transaction mode, whose server sessions are not its clients'. Between 100 ms and 1 hour; the
     * holder's bound should be well below its lease's duration, or nothing is gained.
     */
    public Builder sessionLiveness(Duration bound) {
      ConfigurationException.requireNonNull(bound, "sessionLiveness");
      ConfigurationException.require(bound.compareTo(Duration.ofMillis(100)) >= 0
          && bound.compareTo(Duration.ofHours(1)) <= 0, "sessionLiveness", bound,
          "must be between 100 ms and 1 hour");
      this.sessionLiveness = bound;
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
      return new SqlLeaseStoreImpl(this);
    }
  }
}
