package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.lease.Lease;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.io.IOException;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/** Bad configuration and unreachable databases give errors that name the cause. */
class SqlLeaseStoreErrorsTest {

  @Test
  void builderRejectsBadValuesNamingTheParameter() {
    assertThatThrownBy(() -> SqlLeaseStore.builder(null))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("dataSource");
    DataSource ds = new PGSimpleDataSource();
    assertThatThrownBy(() -> SqlLeaseStore.builder(ds).table("leases; DROP TABLE x"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("table");
    assertThatThrownBy(() -> SqlLeaseStore.builder(ds).table(""))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("table");
    SqlLeaseStore store = SqlLeaseStore.builder(ds).build();
    assertThatThrownBy(() -> store.tryAcquire("n", "o", Duration.ZERO))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("duration");
    assertThatThrownBy(() -> store.tryAcquire("x".repeat(256), "o", Duration.ofSeconds(1)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("name");
  }

  @Test
  void anUnreachableDatabaseIsAClearErrorNotANotAcquired() throws IOException {
    int closedPort;
    try (ServerSocket s = new ServerSocket(0)) {
      closedPort = s.getLocalPort();
    }
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL("jdbc:postgresql://localhost:" + closedPort + "/nowhere?connectTimeout=2");
    SqlLeaseStore store = SqlLeaseStore.builder(ds).table("t_unreachable").build();

    assertThatThrownBy(() -> store.tryAcquire("n", "o", Duration.ofSeconds(1)))
        .isInstanceOf(SluiceException.class)
        .hasMessageContaining("tryAcquire of 'n'")
        .hasMessageContaining("t_unreachable")
        .hasMessageContaining("Connection");
  }

  @Test
  void withoutTableCreationAMissingTableIsNamed() {
    DataSource ds = EmbeddedPostgresServer.shared().dataSource("sluice_test");
    SqlLeaseStore store = SqlLeaseStore.builder(ds).table("never_created").createTable(false)
        .build();

    assertThatThrownBy(() -> store.tryAcquire("n", "o", Duration.ofSeconds(1)))
        .isInstanceOf(SluiceException.class).hasMessageContaining("never_created");
  }

  @Test
  void theDialectIsDetectedAndTheDocumentedDdlCreatesTheTableOnBothDatabases() throws Exception {
    for (DataSource ds : new DataSource[] {
        EmbeddedPostgresServer.shared().dataSource("sluice_test"),
        EmbeddedMariaDb.shared().dataSource("sluice_test")}) {
      SqlLeaseStore store = SqlLeaseStore.builder(ds).table("ddl_check").build();
      Lease lease = store.tryAcquire("ddl", "o", Duration.ofSeconds(5)).orElseThrow();
      assertThat(store.release(lease)).isTrue();
      try (Connection c = ds.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery(
              "SELECT owner, epoch, expires_at, version FROM ddl_check WHERE name = 'ddl'")) {
        assertThat(rs.next()).isTrue();
        assertThat(rs.getString(1)).as("released: no owner").isNull();
        assertThat(rs.getLong(2)).isEqualTo(lease.epoch());
        assertThat(rs.getObject(3)).as("released: no expiry").isNull();
        assertThat(rs.getLong(4)).as("one CAS write per operation").isEqualTo(2);
      }
      assertThat(store.toString()).containsAnyOf("POSTGRESQL", "MARIADB");
    }
  }
}
