package dev.sluice.shedlock;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.sql.EmbeddedMariaDb;

/** ShedLock's provider suite on a real MariaDB 11.4. */
class MariaDbShedLockTest extends ShedLockSuite {
  @Override
  protected LeaseStore createLeaseStore() {
    return SqlLeaseStore.builder(EmbeddedMariaDb.shared().dataSource("sluice_test"))
        .table("shedlock_suite").build();
  }
}
