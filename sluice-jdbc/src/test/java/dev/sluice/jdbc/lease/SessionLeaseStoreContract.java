package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
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
    LeaseRows.delete(dataSource(), "lease_contract_sessions", name);
  }
}
