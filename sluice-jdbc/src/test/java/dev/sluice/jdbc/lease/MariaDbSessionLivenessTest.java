package dev.sluice.jdbc.lease;

import dev.sluice.testkit.sql.EmbeddedMariaDb;
import javax.sql.DataSource;

/**
 * {@link SessionLivenessContract} on a real MariaDB 11.4: sessions are connections, named by a lock
 * ({@code GET_LOCK}) that the server frees when the connection ends.
 */
class MariaDbSessionLivenessTest extends SessionLivenessContract {
  @Override
  protected DataSource dataSource() {
    return EmbeddedMariaDb.shared().dataSource("sluice_test");
  }

  @Override
  protected String jdbcUrl() {
    return EmbeddedMariaDb.shared().jdbcUrl("sluice_test");
  }

  @Override
  protected SqlDialect dialect() {
    return SqlDialect.MARIADB;
  }

  @Override
  protected String terminate(long id) {
    return "KILL CONNECTION " + id;
  }

  @Override
  protected String beforeTheServerStarted() {
    return "UTC_TIMESTAMP(6) - INTERVAL (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS"
        + " WHERE VARIABLE_NAME = 'UPTIME') + 2 SECOND";
  }
}
