package dev.sluice.jdbc.lock;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lock.LockContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;

/** The lock conformance suite on a real PostgreSQL 17. */
class PostgresLockTest extends LockContract {
  @Override
  protected LeaseStore createLeaseStore() {
    return SqlLeaseStore.builder(EmbeddedPostgresServer.shared().dataSource("sluice_test"))
        .table("lock_contract").build();
  }
}
