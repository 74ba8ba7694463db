package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
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
    LeaseRows.delete(EmbeddedPostgresServer.shared().dataSource("sluice_test"), "lease_contract", name);
  }
}
