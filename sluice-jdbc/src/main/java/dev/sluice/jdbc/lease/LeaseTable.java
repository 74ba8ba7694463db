package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The lease table and what the store learns about its database on first contact: the dialect
 * (set on the builder, or detected from the connection's metadata), whether the server takes a
 * lease in one upsert with {@code RETURNING} (ADR 0072), and the table's creation with the
 * documented DDL ({@code postgresql.sql} / {@code mariadb.sql}, ADR 0021) unless the builder turned
 * that off. It is the one owner of those three facts; the other parts of the store ask.
 */
final class LeaseTable {
  private final String name;
  private final boolean create;
  private volatile SqlDialect dialect;
  private volatile boolean ready;
  /** Whether the server takes a lease in one upsert with RETURNING (ADR 0072); null: not asked yet. */
  private volatile Boolean upsertReturning;

  LeaseTable(String name, boolean create, SqlDialect dialect) {
    this.name = name;
    this.create = create;
    this.dialect = dialect;
  }

  /** The table's name as configured, optionally schema-qualified. */
  String name() {
    return name;
  }

  /** The dialect if it was set or has been detected; null before the first connection. */
  SqlDialect knownDialect() {
    return dialect;
  }

  /** Whether the server has the one-statement acquisition; null before the first connection. */
  Boolean upsertReturning() {
    return upsertReturning;
  }

  /** Detects the dialect and creates the table, once; every call runs this on its connection. */
  SqlDialect ready(Connection c) throws SQLException {
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
    if (!ready && create) {
      create(c, d);
    }
    ready = true;
    return d;
  }

  private synchronized void create(Connection c, SqlDialect d) throws SQLException {
    if (ready) {
      return;
    }
    String ddl = d.ddl(name);
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
}
