package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import java.time.Clock;

/**
 * The lease-store conformance suite on MariaDB 11.4 with the read-then-write acquisition, the one
 * servers without an upsert with RETURNING (MySQL, MariaDB before 10.5) use (ADR 0072). No MySQL
 * server can be started here; this runs that code path on the closest real server.
 */
class MariaDbReadThenWriteLeaseStoreTest extends MariaDbSqlLeaseStoreTest {
  @Override
  protected LeaseStore createStore(Clock processClock) {
    return SqlLeaseStore.builder(EmbeddedMariaDb.shared().dataSource("sluice_test"))
        .table("lease_contract")
        .readThenWriteAcquire()
        .build();
  }
}
