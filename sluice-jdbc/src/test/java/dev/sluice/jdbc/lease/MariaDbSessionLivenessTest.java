package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.lease.LeaseStoreException;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import java.time.Duration;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

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

  /**
   * A liveness session must live on the server the leases are written on, where standbys look for
   * it: on a read-only server (a replica behind a balancing URL or proxy) a standby would find a live
   * holder's session gone, so the option refuses, naming why, and no retry helps. (PostgreSQL's
   * counterpart, a standby in recovery, has no test: no replica here.)
   */
  @Test
  void aLivenessSessionOnAReadOnlyServerIsRefusedNamingWhy() throws Exception {
    SqlLeaseStore store = store(true);
    store.list(""); // the table and its columns first: the user writes despite read_only (it is root)
    execute("SET GLOBAL read_only = 1");
    try {
      assertThatThrownBy(() -> store.tryAcquire("read-only/x#0", "a", Duration.ofSeconds(5)))
          .isInstanceOf(LeaseStoreException.class)
          .hasMessageContaining("sessionLiveness").hasMessageContaining("read-only server")
          .satisfies(e -> assertThat(((LeaseStoreException) e).retryable()).isFalse());
    } finally {
      execute("SET GLOBAL read_only = 0");
    }
  }
}
