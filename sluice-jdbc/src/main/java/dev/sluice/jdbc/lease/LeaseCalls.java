package dev.sluice.jdbc.lease;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.util.concurrent.Executor;
import javax.sql.DataSource;

/**
 * One lease-store call: a connection borrowed from the pool for the call, whose requests wait at
 * most a bound for the database's answer (the JDBC network timeout, set for the call and restored
 * after; ADR 0101), the table made ready on it ({@link LeaseTable#ready}), and any SQL failure
 * reported as a {@link dev.sluice.lease.LeaseStoreException} naming the call ({@link SqlFailures}).
 * The bounds themselves (a third of a held lease, or the operation timeout) are the store's
 * {@link dev.sluice.lease.LeaseCallBounds}; this class applies the number it is given.
 */
record LeaseCalls(DataSource dataSource, LeaseTable table, long operationTimeoutMillis) {
  /** Runs {@code setNetworkTimeout}'s work, if any, on the calling thread. */
  private static final Executor DIRECT = Runnable::run;

  /** The work of one call on its connection; {@code X} is what it may throw besides SQL failures. */
  @FunctionalInterface
  interface Call<T, X extends Exception> {
    T run(Connection c, SqlDialect d) throws SQLException, X;
  }

  /** {@code body} bounded by the operation timeout (calls that hold no lease). */
  <T, X extends Exception> T call(String op, String name, Call<T, X> body) throws X {
    return call(op, name, operationTimeoutMillis, body);
  }

  /** {@code body} on a connection whose requests wait at most {@code bound} ms for an answer. */
  <T, X extends Exception> T call(String op, String name, long bound, Call<T, X> body) throws X {
    try (Connection c = dataSource.getConnection()) {
      int previousTimeout = limit(c, bound);
      try {
        return body.run(c, table.ready(c));
      } finally {
        unlimit(c, previousTimeout);
      }
    } catch (SQLException e) {
      throw SqlFailures.failure(op, name, table.name(), e);
    }
  }

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
}
