package dev.sluice.jdbc.lease;

import dev.sluice.testkit.sql.EmbeddedMariaDb;
import javax.sql.DataSource;

/** {@link SessionLeaseStoreContract} on a real MariaDB 11.4. */
class MariaDbSessionLeaseStoreTest extends SessionLeaseStoreContract {
  @Override
  protected DataSource dataSource() {
    return EmbeddedMariaDb.shared().dataSource("sluice_test");
  }
}
