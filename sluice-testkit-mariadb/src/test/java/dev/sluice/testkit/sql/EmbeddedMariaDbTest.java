package dev.sluice.testkit.sql;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** The embedded MariaDB starts with the settings the tests rely on. */
class EmbeddedMariaDbTest {

  @Test
  void mariaDbCreatesDatabasesOverJdbcWithoutTls() throws SQLException {
    EmbeddedMariaDb maria = EmbeddedMariaDb.shared();
    DataSource ds = maria.dataSource("servers_test");
    exec(ds, "CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY) ENGINE=InnoDB");
    exec(ds, "REPLACE INTO t VALUES (1)");
    assertThat(count(ds, "SELECT count(*) FROM t")).isEqualTo(1);
    assertThat(count(ds, "SELECT @@innodb_flush_log_at_trx_commit")).isEqualTo(1);
    assertThat(maria.jdbcUrl("x")).contains("sslMode=disable");
  }

  private static void exec(DataSource ds, String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  private static int count(DataSource ds, String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getInt(1);
    }
  }
}
