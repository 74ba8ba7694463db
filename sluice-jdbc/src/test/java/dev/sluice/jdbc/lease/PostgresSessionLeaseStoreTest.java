package dev.sluice.jdbc.lease;

import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import javax.sql.DataSource;

/** {@link SessionLeaseStoreContract} on a real PostgreSQL 17. */
class PostgresSessionLeaseStoreTest extends SessionLeaseStoreContract {
  @Override
  protected DataSource dataSource() {
    return EmbeddedPostgresServer.shared().dataSource("sluice_test");
  }
}
