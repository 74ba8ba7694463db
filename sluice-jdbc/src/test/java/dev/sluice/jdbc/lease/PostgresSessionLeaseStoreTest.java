package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;

/**
 * The lease-store conformance suite on a real PostgreSQL 17 with session liveness on (ADR 0114):
 * the option changes who may take a lease early, never any rule of the contract.
 */
class PostgresSessionLeaseStoreTest extends LeaseStoreContract {
  private final List<SqlLeaseStore> stores = new ArrayList<>();

  @AfterEach
  void closeStores() {
    stores.forEach(SqlLeaseStore::close);
  }

  @Override
  protected LeaseStore createStore(Clock processClock) {
    SqlLeaseStore store = SqlLeaseStore.builder(EmbeddedPostgresServer.shared().dataSource("sluice_test"))
        .table("lease_contract_sessions")
        .sessionLiveness(Duration.ofSeconds(2))
        .build();
    stores.add(store);
    return store;
  }

  @Override
  protected void deleteRecordDirectly(String name) {
    try (Connection c = EmbeddedPostgresServer.shared().dataSource("sluice_test").getConnection();
        PreparedStatement ps = c.prepareStatement("DELETE FROM lease_contract_sessions WHERE name = ?")) {
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
