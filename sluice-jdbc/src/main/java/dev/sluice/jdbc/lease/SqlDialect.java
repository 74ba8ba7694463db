package dev.sluice.jdbc.lease;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.DatabaseMetaData;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Locale;

/** What differs between PostgreSQL and MariaDB/MySQL for the lease table. */
enum SqlDialect {
  POSTGRESQL("now()", "CAST(EXTRACT(EPOCH FROM now()) * 1000000 AS BIGINT)", "postgresql.sql") {
    @Override
    void setTime(PreparedStatement ps, int index, Instant time) throws SQLException {
      ps.setObject(index, time == null ? null : OffsetDateTime.ofInstant(time, ZoneOffset.UTC));
    }

    @Override
    Instant getTime(ResultSet rs, int index) throws SQLException {
      OffsetDateTime t = rs.getObject(index, OffsetDateTime.class);
      return t == null ? null : t.toInstant();
    }

    @Override
    boolean isDuplicateKey(SQLException e) {
      return "23505".equals(e.getSQLState());
    }

    @Override
    boolean isConcurrentUpdate(SQLException e) {
      // 40001 serialization_failure ("could not serialize access due to concurrent update"),
      // 40P01 deadlock_detected, 55P03 lock_not_available (lock_timeout, see guard).
      return "40001".equals(e.getSQLState()) || "40P01".equals(e.getSQLState())
          || "55P03".equals(e.getSQLState());
    }

    /**
     * A holder that stops in the middle of a lease transaction (frozen, paused by GC, cut off)
     * keeps the row locked while its session waits in the transaction; the server ends such a
     * session after {@link #TRANSACTION_IDLE} ({@code idle_in_transaction_session_timeout}), so the
     * lock cannot outlive the lease by more than that; and a statement waits for a row lock at
     * most as long ({@code lock_timeout}), then counts as a lost race. {@code SET LOCAL}: both end
     * with the transaction, the pooled connection keeps its own settings.
     */
    @Override
    void guard(java.sql.Connection c) throws SQLException {
      try (java.sql.Statement st = c.createStatement()) {
        String ms = "'" + TRANSACTION_IDLE.toMillis() + "ms'";
        st.execute("SET LOCAL idle_in_transaction_session_timeout = " + ms + "; SET LOCAL lock_timeout = " + ms);
      }
    }

    /** ON CONFLICT ... DO UPDATE ... WHERE: atomic under READ COMMITTED, no row if not taken. */
    @Override
    String acquireStatement(String table) {
      return "INSERT INTO " + table + " AS t (name, owner, epoch, expires_at, version)"
          + " VALUES (?, ?, " + nowMicros + ", now() + ? * INTERVAL '1 microsecond', 1)"
          + " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner,"
          + " epoch = GREATEST(t.epoch + 1, EXCLUDED.epoch), expires_at = EXCLUDED.expires_at,"
          + " version = t.version + 1"
          + " WHERE t.owner IS NULL OR t.expires_at IS NULL OR t.expires_at <= now()"
          + " OR t.owner = EXCLUDED.owner"
          + " RETURNING t.owner, t.epoch, t.expires_at, t.checkpoint, t.checkpoint_time";
    }

    @Override
    boolean upsertReturning(DatabaseMetaData meta) {
      return true; // ON CONFLICT since 9.5; the store needs 10 or later anyway
    }
  },

  /** MariaDB and MySQL (InnoDB): times stored as UTC DATETIME(6). */
  MARIADB("UTC_TIMESTAMP(6)",
      "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))", "mariadb.sql") {
    @Override
    void setTime(PreparedStatement ps, int index, Instant time) throws SQLException {
      ps.setObject(index, time == null ? null : LocalDateTime.ofInstant(time, ZoneOffset.UTC));
    }

    @Override
    Instant getTime(ResultSet rs, int index) throws SQLException {
      LocalDateTime t = rs.getObject(index, LocalDateTime.class);
      return t == null ? null : t.toInstant(ZoneOffset.UTC);
    }

    @Override
    boolean isDuplicateKey(SQLException e) {
      return e.getErrorCode() == 1062 || "23000".equals(e.getSQLState()) && e.getErrorCode() == 0;
    }

    @Override
    boolean isConcurrentUpdate(SQLException e) {
      // 1213 deadlock, 1205 lock wait timeout, 1020 "record has changed since last read"
      // (innodb_snapshot_isolation=ON), 40001 serialization failure.
      int code = e.getErrorCode();
      return code == 1213 || code == 1205 || code == 1020 || "40001".equals(e.getSQLState());
    }

    /**
     * ON DUPLICATE KEY UPDATE whose every assignment keeps the old value unless the row is free,
     * expired or this owner's. The owner is assigned before the expiry, so the condition has the
     * same value in every assignment whether they are evaluated left to right on the changing row
     * (the default) or all on the old row (sql_mode SIMULTANEOUS_ASSIGNMENT). RETURNING gives the
     * row as stored: ours only if we took it.
     */
    @Override
    String acquireStatement(String table) {
      String free = "(owner IS NULL OR expires_at IS NULL OR expires_at <= " + now
          + " OR owner = VALUES(owner))";
      return "INSERT INTO " + table + " (name, owner, epoch, expires_at, version)"
          + " VALUES (?, ?, " + nowMicros + ", " + now + " + INTERVAL ? MICROSECOND, 1)"
          + " ON DUPLICATE KEY UPDATE"
          + " epoch = IF(" + free + ", GREATEST(epoch + 1, VALUES(epoch)), epoch),"
          + " version = IF(" + free + ", version + 1, version),"
          + " owner = IF(" + free + ", VALUES(owner), owner),"
          + " expires_at = IF(" + free + ", VALUES(expires_at), expires_at)"
          + " RETURNING owner, epoch, expires_at, checkpoint, checkpoint_time";
    }

    /**
     * INSERT ... RETURNING since MariaDB 10.5; MySQL has none. (A MySQL driver on MariaDB reports
     * version 5.5.5-10.x: it gets the read-then-write transaction, which is also correct.)
     */
    @Override
    boolean upsertReturning(DatabaseMetaData meta) throws SQLException {
      String version = meta.getDatabaseProductVersion();
      return version != null && version.toLowerCase(Locale.ROOT).contains("mariadb")
          && meta.getDatabaseMajorVersion() * 100 + meta.getDatabaseMinorVersion() >= 1005;
    }
  };

  /** The database's clock as a timestamp. */
  final String now;
  /** The database's clock in microseconds since the epoch, as a BIGINT expression. */
  final String nowMicros;
  private final String ddlResource;

  SqlDialect(String now, String nowMicros, String ddlResource) {
    this.now = now;
    this.nowMicros = nowMicros;
    this.ddlResource = ddlResource;
  }

  abstract void setTime(PreparedStatement ps, int index, Instant time) throws SQLException;

  abstract Instant getTime(ResultSet rs, int index) throws SQLException;

  abstract boolean isDuplicateKey(SQLException e);

  abstract boolean isConcurrentUpdate(SQLException e);

  /**
   * The one-statement acquisition (ADR 0072), parameters name, owner, duration in microseconds;
   * its row, if any, is (owner, epoch, expires_at, checkpoint, checkpoint_time) as stored.
   */
  abstract String acquireStatement(String table);

  /** Whether the server runs {@link #acquireStatement}. */
  abstract boolean upsertReturning(DatabaseMetaData meta) throws SQLException;

  /** How long a lease transaction may wait idle or for a row lock where the dialect can bound it. */
  static final java.time.Duration TRANSACTION_IDLE = java.time.Duration.ofSeconds(2);

  /**
   * Bounds, inside a lease transaction that has begun, how long the database keeps it open while
   * its client is silent, and how long a statement waits for a row lock. Nothing where the
   * database has no per-transaction setting for it (MariaDB: see ADR 0070).
   */
  void guard(java.sql.Connection c) throws SQLException {}

  /** The name of the documented DDL's resource, next to this class. */
  String ddlResource() {
    return ddlResource;
  }

  /** The documented DDL (a resource next to this class) for {@code table}. */
  String ddl(String table) {
    try (InputStream in = SqlDialect.class.getResourceAsStream(ddlResource)) {
      if (in == null) {
        throw new IllegalStateException("Missing resource " + ddlResource);
      }
      String sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      StringBuilder statement = new StringBuilder();
      for (String line : sql.split("\n")) {
        if (!line.startsWith("--")) {
          statement.append(line).append('\n');
        }
      }
      return statement.toString().replace("sluice_lease", table).trim();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static SqlDialect detect(String productName) {
    String p = productName == null ? "" : productName.toLowerCase(Locale.ROOT);
    if (p.contains("postgres")) {
      return POSTGRESQL;
    }
    if (p.contains("mariadb") || p.contains("mysql")) {
      return MARIADB;
    }
    return null;
  }
}
