package dev.sluice.jdbc.lock;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lock.LockContract;
import dev.sluice.testkit.sql.EmbeddedMariaDb;

/** The lock conformance suite on a real MariaDB 11.4. */
class MariaDbLockTest extends LockContract {
  @Override
  protected LeaseStore createLeaseStore() {
    return SqlLeaseStore.builder(EmbeddedMariaDb.shared().dataSource("sluice_test"))
        .table("lock_contract").build();
  }
}
