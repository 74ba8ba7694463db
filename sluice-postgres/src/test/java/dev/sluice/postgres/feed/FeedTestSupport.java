package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** What the PostgreSQL feed tests share: statements on a database of the test kit's server, and reading a cursor. */
final class FeedTestSupport {
  private FeedTestSupport() {}

  /** Runs {@code statements} one by one, each committed, on database {@code db} of the shared server. */
  static void sql(String db, String... statements) throws SQLException {
    try (Connection c = EmbeddedPostgresServer.shared().dataSource(db).getConnection();
        Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  /** Exactly {@code count} changes from {@code c}, polled {@code wait} at a time for at most 30 s. */
  static List<ChangeEvent<Map<String, Object>>> read(FeedCursor<Map<String, Object>> c, int count, Duration wait) {
    List<ChangeEvent<Map<String, Object>>> out = new ArrayList<>();
    long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (out.size() < count && System.nanoTime() < deadline) {
      out.addAll(c.poll(wait));
    }
    assertThat(out).as("changes read").hasSize(count);
    return out;
  }
}
