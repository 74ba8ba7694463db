package dev.sluice.jdbc.lease;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
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

  /** How long a lease transaction may wait idle or for a row lock where the dialect can bound it. */
  static final java.time.Duration TRANSACTION_IDLE = java.time.Duration.ofSeconds(2);

  /**
   * Bounds, inside a lease transaction that has begun, how long the database keeps it open while
   * its client is silent, and how long a statement waits for a row lock. Nothing where the
   * database has no per-transaction setting for it (MariaDB: see ADR 0070).
   */
  void guard(java.sql.Connection c) throws SQLException {}

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
