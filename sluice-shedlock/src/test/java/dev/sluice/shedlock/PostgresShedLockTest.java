package dev.sluice.shedlock;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;

/** ShedLock's provider suite on a real PostgreSQL 17. */
class PostgresShedLockTest extends ShedLockSuite {
  @Override
  protected LeaseStore createLeaseStore() {
    return SqlLeaseStore.builder(EmbeddedPostgresServer.shared().dataSource("sluice_test"))
        .table("shedlock_suite").build();
  }
}
