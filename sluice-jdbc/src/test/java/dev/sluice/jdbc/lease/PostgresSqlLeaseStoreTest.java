package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Clock;

/** The lease-store conformance suite on a real PostgreSQL 17. */
class PostgresSqlLeaseStoreTest extends LeaseStoreContract {
  @Override
  protected LeaseStore createStore(Clock processClock) {
    // The SQL store never reads the process clock: expiry is judged with now() of the database.
    return SqlLeaseStore.builder(EmbeddedPostgresServer.shared().dataSource("sluice_test"))
        .table("lease_contract")
        .build();
  }

  @Override
  protected void deleteRecordDirectly(String name) {
    try (Connection c = EmbeddedPostgresServer.shared().dataSource("sluice_test").getConnection();
        PreparedStatement ps = c.prepareStatement("DELETE FROM lease_contract WHERE name = ?")) {
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
