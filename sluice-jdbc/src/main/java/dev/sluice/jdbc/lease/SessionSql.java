package dev.sluice.jdbc.lease;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.Instant;

/**
 * What differs between PostgreSQL and MariaDB for session liveness (ADR 0114): how a holder's
 * session is named and confirmed, how a standby finds it gone, the acquisition that records it, and
 * the four columns. A session is named by a number and its start, which together never repeat on
 * one server run: PostgreSQL's backend pid and {@code backend_start}; on MariaDB the connection id
 * and the session's first clock reading, under which the session holds the named lock
 * {@code GET_LOCK('sluice-session/<id>/<start in micros>')}, freed by the server when the session
 * ends ({@code IS_FREE_LOCK} is visible to every user, unlike another user's row of the process
 * list). Both refuse to count a session gone that began before the server did (a restart).
 */
enum SessionSql {
  POSTGRESQL(SqlDialect.POSTGRESQL, "INTEGER", "TIMESTAMP WITH TIME ZONE",
      // A session of another database user may show no backend_start: then it counts as alive.
      "{t}holder_since >= pg_postmaster_start_time()"
          + " AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = {t}holder_pid"
          + " AND (a.backend_start IS NULL OR a.backend_start = {t}holder_since))", 1) {
    @Override
    String refusal(Connection c) throws SQLException {
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT pg_is_in_recovery()")) {
        rs.next();
        return rs.getBoolean(1) ? "its connection reached a standby in recovery (pg_is_in_recovery()), where"
            + " the leases are not written: a standby checks sessions on the primary and would find this one"
            + " gone. Point the DataSource at the primary (pgjdbc: targetServerType=primary)" : null;
      }
    }

    @Override
    Session open(Connection c) throws SQLException {
      try (Statement st = c.createStatement()) {
        st.execute("SET idle_in_transaction_session_timeout = 0");
      }
      try (Statement st = c.createStatement()) {
        st.execute("SET idle_session_timeout = 0");
      } catch (SQLException e) {
        if (!"42704".equals(e.getSQLState())) { // undefined_object: before PostgreSQL 14
          throw e;
        }
      }
      return confirm(c, null);
    }

    @Override
    Session confirm(Connection c, Session opened) throws SQLException {
      try (PreparedStatement ps = c.prepareStatement(
          "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()");
          ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          throw new SQLException("pg_stat_activity has no row for this session");
        }
        return new Session(rs.getInt(1), dialect.getTime(rs, 2));
      }
    }

    @Override
    void bindId(PreparedStatement ps, int index, Long id) throws SQLException {
      if (id == null) {
        ps.setNull(index, Types.INTEGER);
      } else {
        ps.setInt(index, Math.toIntExact(id));
      }
    }

    @Override
    String acquireStatement(String table, boolean found) {
      String micros = dialect.nowMicros;
      return "INSERT INTO " + table + " AS t (name, owner, epoch, expires_at, version, " + COLUMNS + ")"
          + " VALUES (?, ?, " + micros + ", now() + ? * INTERVAL '1 microsecond', 1, ?, ?, ?, " + micros + ")"
          + " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner,"
          + " epoch = GREATEST(t.epoch + 1, EXCLUDED.epoch), expires_at = EXCLUDED.expires_at,"
          + " version = t.version + 1, holder_pid = EXCLUDED.holder_pid,"
          + " holder_since = EXCLUDED.holder_since, holder_bound_ms = EXCLUDED.holder_bound_ms,"
          + " holder_epoch = GREATEST(t.epoch + 1, EXCLUDED.epoch)"
          + " WHERE t.owner IS NULL OR t.expires_at IS NULL OR t.expires_at <= now()"
          + " OR t.owner = EXCLUDED.owner" + (found ? " OR (" + foundGone("t.") + ")" : "")
          + " RETURNING t.owner, t.epoch, t.expires_at, t.checkpoint, t.checkpoint_time";
    }
  },

  MARIADB(SqlDialect.MARIADB, "BIGINT", "DATETIME(6)",
      "{t}holder_since >= " + SqlDialect.MARIADB.now + " - INTERVAL (SELECT VARIABLE_VALUE FROM"
          + " information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME') SECOND"
          + " AND IS_FREE_LOCK(CONCAT('sluice-session/', {t}holder_pid, '/',"
          + " TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {t}holder_since))) = 1", 8) {
    @Override
    String refusal(Connection c) throws SQLException {
      try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT @@read_only,"
          + " (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME = 'WSREP_ON')")) {
        rs.next();
        if ("ON".equalsIgnoreCase(rs.getString(2))) {
          return "the server is a Galera cluster node (wsrep_on), whose named locks are per node: a standby"
              + " connected to another node would find a live holder's lock free";
        }
        return rs.getInt(1) != 0 ? "its connection reached a read-only server (read_only = ON: a replica?),"
            + " where the leases are not written: a standby checks sessions on the primary and would find"
            + " this one gone. Point the DataSource at the primary" : null;
      }
    }

    @Override
    Session open(Connection c) throws SQLException {
      Session s;
      try (Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("SELECT CONNECTION_ID(), " + dialect.now)) {
        rs.next();
        s = new Session(rs.getLong(1), dialect.getTime(rs, 2));
      }
      onNamedLock(c, "SELECT GET_LOCK(?, 0)", s, "could not take the session's named lock ");
      return s;
    }

    @Override
    Session confirm(Connection c, Session opened) throws SQLException {
      onNamedLock(c, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", opened,
          "this session no longer holds its named lock ");
      return opened;
    }

    @Override
    void bindId(PreparedStatement ps, int index, Long id) throws SQLException {
      if (id == null) {
        ps.setNull(index, Types.BIGINT);
      } else {
        ps.setLong(index, id);
      }
    }

    /**
     * ADR 0072's ON DUPLICATE KEY UPDATE with the session columns and one more "free" case. The
     * owner is assigned first: from then on the condition holds through {@code owner =
     * VALUES(owner)} whether the assignments see the changing row (the default) or the old one
     * (SIMULTANEOUS_ASSIGNMENT), although the later ones change what its session case reads; and
     * {@code holder_epoch} is assigned before {@code epoch}, so it gets the new epoch either way.
     */
    @Override
    String acquireStatement(String table, boolean found) {
      String now = dialect.now;
      String free = "(owner IS NULL OR expires_at IS NULL OR expires_at <= " + now
          + " OR owner = VALUES(owner)" + (found ? " OR (" + foundGone("") + ")" : "") + ")";
      return "INSERT INTO " + table + " (name, owner, epoch, expires_at, version, " + COLUMNS + ")"
          + " VALUES (?, ?, " + dialect.nowMicros + ", " + now + " + INTERVAL ? MICROSECOND, 1, ?, ?, ?, "
          + dialect.nowMicros + ")"
          + " ON DUPLICATE KEY UPDATE"
          + " owner = IF(" + free + ", VALUES(owner), owner),"
          + " holder_epoch = IF(" + free + ", GREATEST(epoch + 1, VALUES(epoch)), holder_epoch),"
          + " epoch = IF(" + free + ", GREATEST(epoch + 1, VALUES(epoch)), epoch),"
          + " version = IF(" + free + ", version + 1, version),"
          + " expires_at = IF(" + free + ", VALUES(expires_at), expires_at),"
          + " holder_pid = IF(" + free + ", VALUES(holder_pid), holder_pid),"
          + " holder_since = IF(" + free + ", VALUES(holder_since), holder_since),"
          + " holder_bound_ms = IF(" + free + ", VALUES(holder_bound_ms), holder_bound_ms)"
          + " RETURNING owner, epoch, expires_at, checkpoint, checkpoint_time";
    }
  };

  /** A server session: a number and its start, which together never repeat on one server run. */
  record Session(long id, Instant since) {}

  /** The columns of ADR 0114, in this order in every statement. */
  static final String COLUMNS = "holder_pid, holder_since, holder_bound_ms, holder_epoch";

  final SqlDialect dialect;
  private final String idType;
  private final String timeType;
  /** The condition that a row's recorded session no longer exists; {@code {t}} the row's alias. */
  private final String sessionEnded;
  /** How often {@link #acquireStatement} repeats the found-gone condition (its parameters too). */
  final int foundGoneUses;

  SessionSql(SqlDialect dialect, String idType, String timeType, String sessionEnded, int foundGoneUses) {
    this.dialect = dialect;
    this.idType = idType;
    this.timeType = timeType;
    this.sessionEnded = sessionEnded;
    this.foundGoneUses = foundGoneUses;
  }

  static SessionSql of(SqlDialect d) {
    return d == SqlDialect.POSTGRESQL ? POSTGRESQL : MARIADB;
  }

  /**
   * Why a liveness session cannot live on the server {@code c} reached, or null: it must be the
   * server the leases are written on, since standbys look for sessions there.
   */
  abstract String refusal(Connection c) throws SQLException;

  /** Prepares a new connection as a liveness session and names it. */
  abstract Session open(Connection c) throws SQLException;

  /** Confirms that {@code c} is still the session {@code opened} named; returns its name now. */
  abstract Session confirm(Connection c, Session opened) throws SQLException;

  abstract void bindId(PreparedStatement ps, int index, Long id) throws SQLException;

  /**
   * The acquisition that records the session (parameters: name, owner, duration in microseconds,
   * the session's id, start and bound; with {@code found}, then {@link #foundGoneUses} times the
   * session a standby found gone: epoch, id, start); its row, if any, is (owner, epoch, expires_at,
   * checkpoint, checkpoint_time) as stored.
   */
  abstract String acquireStatement(String table, boolean found);

  /**
   * The condition, on a row aliased {@code alias} (with its dot, or empty), that its recorded
   * session is gone: recorded for the row's current epoch, begun after the server started, and no
   * longer on the server.
   */
  String sessionGone(String alias) {
    return alias + "holder_pid IS NOT NULL AND " + alias + "holder_epoch = " + alias + "epoch AND "
        + sessionEnded.replace("{t}", alias);
  }

  /** {@link #sessionGone} for the session a standby found gone (three parameters). */
  String foundGone(String alias) {
    return alias + "epoch = ? AND " + alias + "holder_pid = ? AND " + alias + "holder_since = ? AND "
        + sessionGone(alias);
  }

  /** Adds the four columns where they are missing. */
  String addColumns(String table) {
    return "ALTER TABLE " + table + " ADD COLUMN IF NOT EXISTS holder_pid " + idType + ","
        + " ADD COLUMN IF NOT EXISTS holder_since " + timeType + ","
        + " ADD COLUMN IF NOT EXISTS holder_bound_ms BIGINT,"
        + " ADD COLUMN IF NOT EXISTS holder_epoch BIGINT";
  }

  /** The MariaDB session's named lock. */
  static String lockName(Session s) {
    return "sluice-session/" + s.id() + "/" + LeaseStatements.micros(s.since());
  }

  /**
   * Runs {@code sql} on the session's named lock (MariaDB); unless it answers 1, fails with
   * {@code failure} and the lock's name.
   */
  private static void onNamedLock(Connection c, String sql, Session s, String failure) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, lockName(s));
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next() || rs.getInt(1) != 1) {
          throw new SQLException(failure + lockName(s));
        }
      }
    }
  }
}
