package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.lease.Lease;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** {@link SessionLivenessContract} on a real PostgreSQL 17: sessions are backends, pid and start. */
class PostgresSessionLivenessTest extends SessionLivenessContract {
  @Override
  protected DataSource dataSource() {
    return EmbeddedPostgresServer.shared().dataSource("sluice_test");
  }

  @Override
  protected String jdbcUrl() {
    return EmbeddedPostgresServer.shared().jdbcUrl("sluice_test");
  }

  @Override
  protected SqlDialect dialect() {
    return SqlDialect.POSTGRESQL;
  }

  @Override
  protected String terminate(long id) {
    return "SELECT pg_terminate_backend(" + id + ")";
  }

  @Override
  protected String beforeTheServerStarted() {
    return "pg_postmaster_start_time() - INTERVAL '1 second'";
  }

  @Test
  void theOptionIsRefusedWhereItCannotHold() throws Exception {
    assertThatThrownBy(() -> SqlLeaseStore.builder(dataSource()).sessionLiveness(Duration.ofMillis(50)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("sessionLiveness")
        .hasMessageContaining("between 100 ms and 1 hour");

    execute("CREATE TABLE IF NOT EXISTS lease_sessions_old (name VARCHAR(255) NOT NULL PRIMARY KEY,"
        + " owner VARCHAR(255), epoch BIGINT NOT NULL, expires_at TIMESTAMP WITH TIME ZONE,"
        + " version BIGINT NOT NULL, checkpoint TEXT, checkpoint_time TIMESTAMP WITH TIME ZONE)");
    SqlLeaseStore noColumns = SqlLeaseStore.builder(dataSource()).table("lease_sessions_old")
        .createTable(false).sessionLiveness(BOUND).build();
    stores.add(noColumns);
    assertThatThrownBy(() -> noColumns.tryAcquire("x", "a", Duration.ofSeconds(5)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("holder_pid, holder_since, holder_bound_ms, holder_epoch")
        .hasMessageContaining("lease_sessions_old").hasMessageContaining("postgresql.sql");
    Optional<Lease> plain = SqlLeaseStore.builder(dataSource()).table("lease_sessions_old")
        .createTable(false).build().tryAcquire("x-" + UUID.randomUUID(), "a", Duration.ofSeconds(5));
    assertThat(plain).as("without the option the old table serves as before").isPresent();
  }
}
