package dev.sluice.jdbc.lease;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;

/**
 * Acquisition in one statement where the server has an upsert with {@code RETURNING} (PostgreSQL;
 * MariaDB 10.5 and later): an insert, or an update of the existing row only if it is free, expired
 * or this owner's, judged on the row as it is when the statement locks it
 * ({@link SqlDialect#acquireStatement}, ADR 0072).
 */
record UpsertAcquire(LeaseCalls calls, String table) implements AcquireStrategy {
  @Override
  public Optional<Lease> acquire(String name, String owner, Duration duration, long bound) {
    return calls.call("tryAcquire", name, bound, (c, d) -> upsert(c, d, name, owner, duration));
  }

  /** The upsert; empty if someone else holds the lease or won the statement's race. */
  private Optional<Lease> upsert(Connection c, SqlDialect d, String name, String owner,
      Duration duration) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(d.acquireStatement(table))) {
      ps.setString(1, name);
      ps.setString(2, owner);
      ps.setLong(3, LeaseStatements.durationMicros(duration));
      return taken(c, d, ps, name, owner);
    }
  }

  /**
   * Runs a one-statement acquisition whose parameters are bound and whose row, if any, is (owner,
   * epoch, expires_at, checkpoint, checkpoint_time) as stored; commits. The lease if {@code owner}
   * took it; empty if someone else holds it or won the statement's race.
   */
  static Optional<Lease> taken(Connection c, SqlDialect d, PreparedStatement ps, String name,
      String owner) throws SQLException {
    try {
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
        CasTransactions.rollbackQuietly(c);
      }
      if (SqlFailures.lostRace(d, e)) {
        return Optional.empty();
      }
      throw e;
    }
  }
}
