package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStoreException;
import java.sql.SQLDataException;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.SQLIntegrityConstraintViolationException;
import java.sql.SQLInvalidAuthorizationSpecException;
import java.sql.SQLNonTransientConnectionException;
import java.sql.SQLRecoverableException;
import java.sql.SQLSyntaxErrorException;
import java.sql.SQLTimeoutException;
import java.sql.SQLTransientException;

/**
 * What a failed lease-store statement means. A lost race ({@link #lostRace}: a duplicate key or a
 * serialization failure, deadlock or lock timeout, by the dialect's codes) is "not acquired" or
 * "try the compare-and-swap again" (ADR 0021), never an error. Anything else is a
 * {@link LeaseStoreException} ({@link #failure}) that says whether it may succeed if simply tried
 * again ({@link #retryable}): judged by the SQLSTATE class first (the same on PostgreSQL and
 * MariaDB/MySQL), then by the JDBC exception type for drivers and pools that set no SQLSTATE.
 */
final class SqlFailures {
  private SqlFailures() {}

  /** Whether {@code e} means someone else wrote the row first (or is writing it now). */
  static boolean lostRace(SqlDialect d, SQLException e) {
    return d.isConcurrentUpdate(e) || d.isDuplicateKey(e);
  }

  /** The failure of call {@code op} of lease {@code name} (null: none) on {@code table}. */
  static LeaseStoreException failure(String op, String name, String table, SQLException e) {
    boolean retryable = retryable(e);
    return new LeaseStoreException("SqlLeaseStore " + op
        + (name == null ? "" : " of '" + name + "'") + " on table " + table + " failed ("
        + (retryable ? "may succeed if retried" : "will not succeed until the database or its"
        + " configuration is fixed") + "): " + e.getMessage() + " (SQLState " + e.getSQLState()
        + ", error " + e.getErrorCode() + ")", retryable, e);
  }

  /**
   * {@code false} for what only a change of configuration can fix: authorization (28), syntax,
   * access and undefined objects (42, e.g. 42501 insufficient privilege, 42P01/42S02 undefined
   * table), data exceptions (22), integrity violations (23), unsupported features (0A), invalid
   * catalog/schema names (3D/3F). {@code true} for connection failures (08), serialization
   * failures and deadlocks (40), operator intervention (57, e.g. 57P01 admin shutdown, 57014
   * statement timeout), insufficient resources (53), timeouts and anything unclassified.
   */
  static boolean retryable(SQLException e) {
    for (SQLException s = e; s != null; s = s.getNextException()) {
      Boolean byState = byState(s.getSQLState());
      if (byState != null) {
        return byState;
      }
      if (s.getNextException() == s) {
        break;
      }
    }
    if (e instanceof SQLTransientException || e instanceof SQLRecoverableException
        || e instanceof SQLNonTransientConnectionException || e instanceof SQLTimeoutException) {
      return true;
    }
    if (e instanceof SQLInvalidAuthorizationSpecException || e instanceof SQLSyntaxErrorException
        || e instanceof SQLDataException || e instanceof SQLIntegrityConstraintViolationException
        || e instanceof SQLFeatureNotSupportedException) {
      return false;
    }
    // Unclassified (MariaDB's generic HY000, a driver's own error): retrying is the cautious
    // answer for a lease, whose holder loses nothing by waiting and stops once the lease expired.
    return true;
  }

  private static Boolean byState(String state) {
    if (state == null || state.length() < 2) {
      return null;
    }
    switch (state.substring(0, 2)) {
      case "08": // connection exception
      case "40": // transaction rollback: serialization failure, deadlock
      case "53": // insufficient resources
      case "57": // operator intervention: admin shutdown, cannot connect now, statement timeout
      case "58": // system error (I/O)
      case "HY": // MariaDB: generic; the exception type decides
        return state.startsWith("HY") ? null : Boolean.TRUE;
      case "28": // invalid authorization specification
      case "42": // syntax error or access rule violation, undefined table
      case "22": // data exception
      case "23": // integrity constraint violation (the duplicate-key race is handled before)
      case "0A": // feature not supported
      case "3D": // invalid catalog (database) name
      case "3F": // invalid schema name
        return Boolean.FALSE;
      default:
        return null;
    }
  }
}
