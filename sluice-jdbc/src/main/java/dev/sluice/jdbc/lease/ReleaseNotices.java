package dev.sluice.jdbc.lease;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Locale;
import java.util.UUID;
import java.util.function.Consumer;
import javax.sql.DataSource;

/**
 * Release notices on PostgreSQL (ADR 0061), the sending side and the choice of watch: the store's
 * releases and deletions notify one channel of the table in the same statement, and
 * {@link #watch} listens on it with a {@link PostgresReleaseWatch}. MariaDB/MySQL have no
 * notifications: there the statements run as they are and nothing is watched.
 */
final class ReleaseNotices {
  private final DataSource dataSource;
  private final String channel;

  ReleaseNotices(DataSource dataSource, String table) {
    this.dataSource = dataSource;
    this.channel = channel(table);
  }

  /**
   * The notification channel of {@code table}: one per table (unquoted names fold to lower case,
   * so both spellings are one table and one channel), within PostgreSQL's 63 bytes.
   */
  static String channel(String table) {
    String channel = "sluice_release." + table.toLowerCase(Locale.ROOT);
    if (channel.length() <= 63) {
      return channel;
    }
    String digest = UUID.nameUUIDFromBytes(channel.getBytes(StandardCharsets.UTF_8))
        .toString().replace("-", "");
    return channel.substring(0, 46) + "." + digest.substring(0, 16);
  }

  /**
   * {@code write} (an UPDATE or DELETE of one row by name) as it runs on {@code d}: on PostgreSQL
   * it also notifies the table's channel with the row's name, in the same statement, so the
   * notice goes out when the change commits and only if a row changed; its one extra parameter is
   * the channel. Elsewhere {@code write} as it is.
   */
  static String notifying(SqlDialect d, String write) {
    return d == SqlDialect.POSTGRESQL
        ? "WITH changed AS (" + write + " RETURNING name) SELECT pg_notify(?, name) FROM changed"
        : write;
  }

  /** Runs a statement {@link #notifying} made, commits, and returns how many rows it changed. */
  int changedAndCommitted(Connection c, SqlDialect d, PreparedStatement ps, int channelIndex)
      throws SQLException {
    int changed;
    if (d == SqlDialect.POSTGRESQL) {
      ps.setString(channelIndex, channel);
      changed = 0;
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          changed++;
        }
      }
    } else {
      changed = ps.executeUpdate();
    }
    if (!c.getAutoCommit()) {
      c.commit();
    }
    return changed;
  }

  /**
   * A watch of the releases under {@code prefix} (the store's {@code watchReleases}) where the
   * database may be PostgreSQL ({@code known}: the dialect if known yet, else null) and pgjdbc is
   * on the class path; a watch of nothing elsewhere.
   */
  AutoCloseable watch(SqlDialect known, String prefix, Consumer<String> released) {
    if (known != null && known != SqlDialect.POSTGRESQL || !pgJdbcPresent()) {
      return () -> { };
    }
    PostgresReleaseWatch watch = new PostgresReleaseWatch(dataSource, channel, prefix, released).start();
    return watch == null ? () -> { } : watch;
  }

  private static boolean pgJdbcPresent() {
    try {
      Class.forName("org.postgresql.PGConnection", false, ReleaseNotices.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }
}
