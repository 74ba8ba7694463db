package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * What reading a feed needs of the server, checked without creating anything: {@code wal_level}
 * is logical, the publication exists and publishes the feed's table, and the published tables
 * have a primary key or another replica identity. Each gap is a FeedException naming the fix.
 */
final class PgPublicationCheck {
  private final PostgresChangeFeedImpl feed;

  PgPublicationCheck(PostgresChangeFeedImpl feed) {
    this.feed = feed;
  }

  /**
   * Refuses, naming what to create, a publication that does not exist or does not publish the
   * feed's table: the stream would otherwise fail at the first read, or stay silent for ever.
   */
  void run() throws SQLException {
    try (Connection c = feed.connections.connect(false)) {
      checkServer(c);
      checkPublication(c);
      if (feed.rows) {
        checkTables(c); // a feed of messages only reads no table's rows
      }
    }
  }

  /** Logical decoding needs {@code wal_level = logical}, which only a restart changes. */
  private void checkServer(Connection c) throws SQLException {
    try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW wal_level")) {
      rs.next();
      if (!"logical".equals(rs.getString(1))) {
        throw new FeedException("PostgreSQL feed '" + feed.stream() + "': the server's wal_level is " + rs.getString(1)
            + ", so it writes no logical decoding information: set wal_level = logical (ALTER SYSTEM SET"
            + " wal_level = logical) and restart the server", null, false);
      }
    }
  }

  /**
   * A published table with neither a primary key nor another replica identity: the server refuses
   * its updates and deletes ("cannot update table ... because it does not have a replica identity
   * and publishes updates"), so the feed refuses it first, naming the fix.
   */
  private void checkTables(Connection c) throws SQLException {
    try (PreparedStatement s = c.prepareStatement("SELECT p.schemaname || '.' || p.tablename, cl.relreplident"
        + " FROM pg_publication_tables p JOIN pg_namespace n ON n.nspname = p.schemaname"
        + " JOIN pg_class cl ON cl.relnamespace = n.oid AND cl.relname = p.tablename"
        + " WHERE p.pubname = ? AND (cl.relreplident = 'n' OR (cl.relreplident = 'd'"
        + " AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = cl.oid AND i.indisprimary)))")) {
      s.setString(1, feed.publication);
      try (ResultSet rs = s.executeQuery()) {
        while (rs.next()) {
          String t = rs.getString(1);
          if (feed.table == null || feed.table.equals(t)) {
            throw new FeedException("PostgreSQL feed '" + feed.stream() + "': table " + t + " has no primary key and"
                + " replica identity " + ("n".equals(rs.getString(2)) ? "NOTHING" : "DEFAULT")
                + ", so its updates and deletes carry no key (the server refuses them while it is published):"
                + " add a primary key, or ALTER TABLE " + t + " REPLICA IDENTITY FULL", null, false);
          }
        }
      }
    }
  }

  private void checkPublication(Connection c) throws SQLException {
    try (PreparedStatement s = c.prepareStatement("SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = ?),"
            + " EXISTS (SELECT 1 FROM pg_publication_tables WHERE pubname = ? AND schemaname || '.' || tablename = ?)")) {
      s.setString(1, feed.publication);
      s.setString(2, feed.publication);
      s.setString(3, feed.table == null ? "" : feed.table);
      try (ResultSet rs = s.executeQuery()) {
        rs.next();
        if (!rs.getBoolean(1)) {
          throw new FeedException("PostgreSQL feed '" + feed.stream() + "': publication " + feed.publication
              + " does not exist in database " + feed.database + ": create it (CREATE PUBLICATION "
              + feed.publication + " FOR TABLE ...)", null, false);
        }
        if (feed.table != null && !rs.getBoolean(2)) {
          throw new FeedException("PostgreSQL feed '" + feed.stream() + "': publication " + feed.publication
              + " does not publish " + feed.table + ", so no change of it would ever arrive: ALTER PUBLICATION "
              + feed.publication + " ADD TABLE " + feed.table, null, false);
        }
      }
    }
  }
}
