package dev.sluice.testkit.sql;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** The embedded PostgreSQL starts with the settings the tests rely on and survives a crash. */
class EmbeddedPostgresServerTest {

  @Test
  void postgresIsDurableAndReadyForLogicalDecodingAndKeepsCommittedRowsAcrossKillDashNine()
      throws SQLException {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      DataSource ds = pg.dataSource("crash_test");
      assertThat(show(ds, "fsync")).isEqualTo("on");
      assertThat(show(ds, "synchronous_commit")).isEqualTo("on");
      assertThat(show(ds, "wal_level")).isEqualTo("logical");
      assertThat(Integer.parseInt(show(ds, "max_replication_slots"))).isPositive();
      exec(ds, "CREATE TABLE t (id INT PRIMARY KEY)");
      exec(ds, "INSERT INTO t VALUES (1), (2)");
      int port = pg.port();

      pg.crashAndRestart();

      assertThat(pg.port()).isEqualTo(port);
      assertThat(count(pg.dataSource("crash_test"), "SELECT count(*) FROM t")).isEqualTo(2);
      pg.restart();
      assertThat(count(pg.dataSource("crash_test"), "SELECT count(*) FROM t")).isEqualTo(2);
    }
  }

  private static String show(DataSource ds, String setting) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SHOW " + setting)) {
      rs.next();
      return rs.getString(1);
    }
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
