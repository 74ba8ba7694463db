package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.Fence;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 defect 3: pgoutput does not send a TOASTed value an update left unchanged (kind 'u').
 * The feed used to leave the column out of a document still labelled as the row after the change.
 * With REPLICA IDENTITY FULL the old row has the value and fills it in; without, the change says
 * it carries no whole row ({@link DocumentState#NONE}), gives the columns it has in {@code
 * changedFields} (as an update description does) and names the missing ones, and the relay's
 * envelope carries no document a consumer could store over the row.
 */
class PostgresUnchangedToastTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private final String db = PG.createDatabase("toast");

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private void sql(String... statements) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  private String body(String table) throws SQLException {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT body, pg_column_size(body) FROM " + table + " WHERE id = 1")) {
      rs.next();
      assertThat(rs.getInt(2)).as("stored out of line, uncompressed").isGreaterThan(2048);
      return rs.getString(1);
    }
  }

  /** A table whose {@code body} is 3,200 characters of md5 text stored out of line, uncompressed. */
  private String table(String name, boolean full) throws SQLException {
    sql("DROP PUBLICATION IF EXISTS pub", "DROP TABLE IF EXISTS " + name,
        "CREATE TABLE " + name + " (id int PRIMARY KEY, n int, body text)",
        "ALTER TABLE " + name + " ALTER COLUMN body SET STORAGE EXTERNAL",
        full ? "ALTER TABLE " + name + " REPLICA IDENTITY FULL" : "SELECT 1",
        "CREATE PUBLICATION pub FOR TABLE " + name);
    return "public." + name;
  }

  private static final String INSERT =
      " VALUES (1, 1, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 100) i))";

  private static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count) {
    List<ChangeEvent<Map<String, Object>>> out = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (out.size() < count && System.nanoTime() < deadline) {
      out.addAll(c.poll(Duration.ofMillis(200)));
    }
    assertThat(out).as("changes read").hasSize(count);
    return out;
  }

  private PostgresChangeFeed feed(String table) {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub").table(table).build();
  }

  @Test
  void anUpdateLeavingAToastedColumnUnchangedIsMarkedPartialAndTheRelayCarriesNoDocumentForIt() throws Exception {
    String table = table("toast_key", false);
    try (FeedCursor<Map<String, Object>> c = feed(table).open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO toast_key" + INSERT, "UPDATE toast_key SET n = 2 WHERE id = 1");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 2);
      String body = body("toast_key");
      assertThat(events.get(0).document()).containsEntry("body", body);
      assertThat(events.get(0).documentState()).isEqualTo(DocumentState.AFTER_CHANGE);

      ChangeEvent<Map<String, Object>> update = events.get(1);
      assertThat(update.operation()).isEqualTo(Operation.UPDATE);
      assertThat(update.documentState()).as("not the whole row").isEqualTo(DocumentState.NONE);
      assertThat(update.document()).isNull();
      assertThat(update.changedFields()).isEqualTo(Map.of("id", 1, "n", 2));
      assertThat(((Map<?, ?>) update.raw()).get("unchangedToasted")).isEqualTo(List.of("body"));

      Envelope envelope = Envelope.parse(MessageEncoder.builder(PostgresDocuments.mapper()).build()
          .encode(update, new Fence("l", "o", 1)).get(0).body());
      assertThat(envelope.document()).as("nothing a consumer could store over the row").isNull();
      assertThat(envelope.documentState()).isEqualTo("NONE");
      assertThat(envelope.changedFields().toString()).isEqualTo("{\"id\":1,\"n\":2}");
    }
  }

  @Test
  void withReplicaIdentityFullTheUnchangedToastedValueIsFilledFromTheOldRow() throws Exception {
    String table = table("toast_full", true);
    try (FeedCursor<Map<String, Object>> c = feed(table).open(PartitionSpec.single(), StartPoint.latest())) {
      sql("INSERT INTO toast_full" + INSERT, "UPDATE toast_full SET n = 2 WHERE id = 1");
      List<ChangeEvent<Map<String, Object>>> events = read(c, 2);
      String body = body("toast_full");
      ChangeEvent<Map<String, Object>> update = events.get(1);
      assertThat(update.documentState()).isEqualTo(DocumentState.AFTER_CHANGE);
      assertThat(update.document()).isEqualTo(Map.of("id", 1, "n", 2, "body", body));
      assertThat(update.before()).isEqualTo(Map.of("id", 1, "n", 1, "body", body));
      assertThat(((Map<?, ?>) update.raw()).containsKey("unchangedToasted")).isFalse();
    }
  }
}
