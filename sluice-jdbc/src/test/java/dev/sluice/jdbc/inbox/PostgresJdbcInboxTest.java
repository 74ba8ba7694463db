package dev.sluice.jdbc.inbox;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

class PostgresJdbcInboxTest extends JdbcInboxContract {
  private static EmbeddedPostgres postgres;

  @BeforeAll
  static void start() throws Exception {
    postgres = EmbeddedPostgres.builder()
        .setServerConfig("synchronous_commit", "on")
        .setServerConfig("fsync", "on")
        .start();
  }

  @AfterAll
  static void stop() throws Exception {
    if (postgres != null) {
      postgres.close();
    }
  }

  @Override
  protected DataSource dataSource() {
    return postgres.getPostgresDatabase();
  }
}
