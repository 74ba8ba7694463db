package dev.sluice.jdbc.inbox;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Clock;
import java.time.Instant;
import java.util.Locale;
import javax.sql.DataSource;

final class JdbcInboxImpl implements JdbcInbox {
  private static final int MAX_ID = 500;

  private final DataSource dataSource;
  private final String table;
  private final String group;
  private final Clock clock;
  private volatile String insertSql;

  JdbcInboxImpl(DataSource dataSource, String table, String group, Clock clock) {
    this.dataSource = dataSource;
    this.table = table;
    this.group = group;
    this.clock = clock;
  }

  @Override
  public boolean processIfNew(String messageId, Work work) {
    if (messageId == null || messageId.isBlank() || messageId.length() > MAX_ID) {
      throw new IllegalArgumentException("messageId must be 1.." + MAX_ID + " characters, but was '" + messageId + "'");
    }
    try (Connection c = dataSource.getConnection()) {
      boolean autoCommit = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        int inserted;
        try (PreparedStatement ps = c.prepareStatement(insertSql(c))) {
          ps.setString(1, group);
          ps.setString(2, messageId);
          ps.setTimestamp(3, Timestamp.from(clock.instant()));
          inserted = ps.executeUpdate();
        }
        if (inserted == 0) {
          c.rollback();
          return false;
        }
        work.run(c);
        c.commit();
        return true;
      } catch (Exception e) {
        rollbackQuietly(c, e);
        if (e instanceof InterruptedException) {
          Thread.currentThread().interrupt();
        }
        throw new InboxException(
            "Processing message " + messageId + " for consumer group '" + group + "' failed and was rolled back: " + e, e);
      } finally {
        c.setAutoCommit(autoCommit);
      }
    } catch (SQLException e) {
      throw new InboxException("Inbox table " + table + " unavailable: " + e.getMessage(), e);
    }
  }

  private String insertSql(Connection c) throws SQLException {
    String sql = insertSql;
    if (sql == null) {
      String product = c.getMetaData().getDatabaseProductName().toLowerCase(Locale.ROOT);
      String columns = table + " (consumer_group, message_id, processed_at) VALUES (?, ?, ?)";
      if (product.contains("postgres")) {
        sql = "INSERT INTO " + columns + " ON CONFLICT DO NOTHING";
      } else if (product.contains("mariadb") || product.contains("mysql")) {
        sql = "INSERT IGNORE INTO " + columns;
      } else {
        throw new InboxException("Unsupported database for the inbox: " + product
            + " (supported: PostgreSQL, MariaDB, MySQL)", null);
      }
      insertSql = sql;
    }
    return sql;
  }

  private static void rollbackQuietly(Connection c, Exception cause) {
    try {
      c.rollback();
    } catch (SQLException e) {
      cause.addSuppressed(e);
    }
  }

  @Override
  public boolean processed(String messageId) {
    return ofGroup("SELECT 1 FROM " + table + " WHERE consumer_group = ? AND message_id = ?", "read", ps -> {
      ps.setString(2, messageId);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next();
      }
    });
  }

  @Override
  public long purgeProcessedBefore(Instant cutoff) {
    return ofGroup("DELETE FROM " + table + " WHERE consumer_group = ? AND processed_at < ?", "purge", ps -> {
      ps.setTimestamp(2, Timestamp.from(cutoff));
      return (long) ps.executeUpdate();
    });
  }

  /** What {@link #ofGroup} runs on its statement, whose first parameter is already set. */
  private interface GroupStatement<T> {
    T run(PreparedStatement ps) throws SQLException;
  }

  /**
   * Runs {@code sql}, whose first parameter is this inbox's consumer group, on a connection of its
   * own; a failure is reported as "Cannot {@code what} inbox table ...".
   */
  private <T> T ofGroup(String sql, String what, GroupStatement<T> body) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, group);
      return body.run(ps);
    } catch (SQLException e) {
      throw new InboxException("Cannot " + what + " inbox table " + table + ": " + e.getMessage(), e);
    }
  }

  @Override
  public void createTable() {
    try (Connection c = dataSource.getConnection();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS " + table + " ("
          + "consumer_group VARCHAR(200) NOT NULL, "
          + "message_id VARCHAR(" + MAX_ID + ") NOT NULL, "
          + "processed_at TIMESTAMP NOT NULL, "
          + "PRIMARY KEY (consumer_group, message_id))");
      s.execute("CREATE INDEX IF NOT EXISTS " + table + "_processed_at ON " + table + " (processed_at)");
      if (!c.getAutoCommit()) {
        c.commit();
      }
    } catch (SQLException e) {
      throw new InboxException("Cannot create inbox table " + table + ": " + e.getMessage(), e);
    }
  }
}
