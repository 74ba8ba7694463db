package dev.sluice.jdbc.lock;

import dev.sluice.testkit.lock.LockFuzzAndCrash;
import dev.sluice.testkit.lock.LockTestBackend;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;

/** Two JVMs, SIGKILL and SIGSTOP against locks on a real PostgreSQL 17. */
class PostgresLockFuzzAndCrashTest extends LockFuzzAndCrash {
  @Override
  protected Class<? extends LockTestBackend> backendClass() {
    return SqlLockTestBackend.class;
  }

  @Override
  protected String backendArgument() {
    EmbeddedPostgresServer server = EmbeddedPostgresServer.shared();
    return server.jdbcUrl(server.createDatabase("sluice_test"));
  }
}
