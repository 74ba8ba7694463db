package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import java.time.Clock;

/** The lease-store conformance suite on a real MariaDB 11.4. */
class MariaDbSqlLeaseStoreTest extends LeaseStoreContract {
  @Override
  protected LeaseStore createStore(Clock processClock) {
    // The SQL store never reads the process clock: expiry is judged with UTC_TIMESTAMP(6).
    return SqlLeaseStore.builder(EmbeddedMariaDb.shared().dataSource("sluice_test"))
        .table("lease_contract")
        .build();
  }

  @Override
  protected void deleteRecordDirectly(String name) {
    LeaseRows.delete(EmbeddedMariaDb.shared().dataSource("sluice_test"), "lease_contract", name);
  }
}
