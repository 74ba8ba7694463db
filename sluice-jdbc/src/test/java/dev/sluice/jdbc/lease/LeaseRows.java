package dev.sluice.jdbc.lease;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import javax.sql.DataSource;

/** The lease-store contracts' {@code deleteRecordDirectly} on a SQL table: an operator's DELETE. */
final class LeaseRows {
  private LeaseRows() {}

  /** Deletes row {@code name} of {@code table}; fails if there was none. */
  static void delete(DataSource dataSource, String table, String name) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement("DELETE FROM " + table + " WHERE name = ?")) {
      ps.setString(1, name);
      if (ps.executeUpdate() != 1) {
        throw new IllegalStateException("no row " + name);
      }
      if (!c.getAutoCommit()) {
        c.commit();
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
