package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStoreException;
import java.sql.Connection;
import java.sql.SQLException;

/**
 * The compare-and-swap transaction of {@code seeds/002} (ADR 0021): under REPEATABLE READ, read
 * the row, write it only if it is still the one read ({@link LeaseStatements#casUpdate}), commit.
 * A lost race anywhere in it (no write, a failed CAS, a lost insert race, a serialization failure
 * or deadlock, also at commit) rolls back and is {@link CasFailed}; renewals, checkpoint commits
 * and, on servers without the one-statement upsert, acquisitions run in it. On PostgreSQL the
 * transaction is bounded on the server first ({@link SqlDialect#guard}, ADR 0070).
 */
final class CasTransactions {
  /** Bounded: only our own concurrent commit/renew can make a held row's CAS fail. */
  private static final int FENCED_WRITE_ATTEMPTS = 10;

  private final LeaseCalls calls;

  CasTransactions(LeaseCalls calls) {
    this.calls = calls;
  }

  /** Thrown inside a transaction to roll back and report "did not win the CAS". */
  static final class CasFailed extends Exception {
    private static final long serialVersionUID = 1L;

    CasFailed() {
      super(null, null, false, false);
    }
  }

  /** The body of a transaction: null or {@link CasFailed} for "not written". */
  @FunctionalInterface
  interface Body<T> {
    T run(Connection c, SqlDialect d) throws SQLException, CasFailed;
  }

  /**
   * Runs {@code body} in a REPEATABLE READ transaction and commits. A null result, a failed CAS,
   * a lost insert race, a serialization failure or a failed commit roll back and throw CasFailed.
   */
  <T> T run(String op, String name, long bound, Body<T> body) throws CasFailed {
    return calls.call(op, name, bound, (c, d) -> inTransaction(c, d, body));
  }

  /** Renew/commit: retried while only the CAS (not owner or epoch) failed. */
  <T> T fencedWrite(String op, Lease lease, long bound, Body<T> body) {
    ConfigurationException.requireNonNull(lease, "lease");
    for (int attempt = 1; ; attempt++) {
      try {
        return run(op, lease.name(), bound, body);
      } catch (CasFailed e) {
        if (attempt >= FENCED_WRITE_ATTEMPTS) {
          throw new LeaseStoreException("SqlLeaseStore " + op + " of '" + lease.name()
              + "' lost " + attempt + " compare-and-swap races in a row; giving up", true, null);
        }
      }
    }
  }

  private static <T> T inTransaction(Connection c, SqlDialect d, Body<T> body)
      throws CasFailed, SQLException {
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
        if (SqlFailures.lostRace(d, e)) {
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
      if (SqlFailures.lostRace(d, e)) {
        throw new CasFailed();
      }
      throw e;
    } finally {
      restore(c, autoCommit, isolation);
    }
  }

  static void rollbackQuietly(Connection c) {
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
}
