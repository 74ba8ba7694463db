package dev.sluice.jdbc.lock;

import dev.sluice.testkit.lock.LockFuzzAndCrash;
import dev.sluice.testkit.lock.LockTestBackend;
import dev.sluice.testkit.sql.EmbeddedMariaDb;

/** Two JVMs, SIGKILL and SIGSTOP against locks on a real MariaDB 11.4. */
class MariaDbLockFuzzAndCrashTest extends LockFuzzAndCrash {
  @Override
  protected Class<? extends LockTestBackend> backendClass() {
    return SqlLockTestBackend.class;
  }

  @Override
  protected String backendArgument() {
    EmbeddedMariaDb server = EmbeddedMariaDb.shared();
    return server.jdbcUrl(server.createDatabase("sluice_test"));
  }
}
