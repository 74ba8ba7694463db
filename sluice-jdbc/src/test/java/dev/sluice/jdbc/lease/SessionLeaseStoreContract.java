package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;

/**
 * The lease-store conformance suite with session liveness on (ADR 0114), for each database that
 * has it: the option changes who may take a lease early, never any rule of the contract.
 */
abstract class SessionLeaseStoreContract extends LeaseStoreContract {
  private final List<SqlLeaseStore> stores = new ArrayList<>();

  @AfterEach
  void closeStores() {
    stores.forEach(SqlLeaseStore::close);
  }

  /** The shared server's pooled DataSource. */
  protected abstract DataSource dataSource();

  @Override
  protected LeaseStore createStore(Clock processClock) {
    SqlLeaseStore store = SqlLeaseStore.builder(dataSource())
        .table("lease_contract_sessions")
        .sessionLiveness(Duration.ofSeconds(2))
        .build();
    stores.add(store);
    return store;
  }

  @Override
  protected void deleteRecordDirectly(String name) {
    try (Connection c = dataSource().getConnection();
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
