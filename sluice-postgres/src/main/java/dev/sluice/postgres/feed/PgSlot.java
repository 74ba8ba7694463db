package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.postgresql.replication.LogSequenceNumber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One partition's replication slot, the SQL about it in one place: its state and the WAL it keeps,
 * creating and dropping it, and ending the session that still holds it after its lease moved
 * (ADR 0065).
 */
final class PgSlot {
  private static final Logger log = LoggerFactory.getLogger(PgSlot.class);

  private final PostgresChangeFeedImpl feed;
  final String name;

  PgSlot(PostgresChangeFeedImpl feed, String name) {
    this.feed = feed;
    this.name = name;
  }

  /**
   * Ends the session that still holds this partition's slot. The listener opens a cursor only
   * while it holds the partition's lease, so the holder is a reader whose lease is gone: a process
   * that froze (SIGSTOP, a long GC pause, a VM migration) or lost its network, whose replication
   * connection the server would otherwise keep for {@code wal_sender_timeout} (60 s by default).
   * Ending it is the slot's fence. Needs the same role, or pg_signal_backend.
   */
  boolean endHolder() throws SQLException {
    try (Connection c = feed.connections.connect(false);
        PreparedStatement s = c.prepareStatement("SELECT active_pid, pg_terminate_backend(active_pid)"
            + " FROM pg_replication_slots WHERE slot_name = ? AND active_pid IS NOT NULL")) {
      s.setString(1, name);
      try (ResultSet rs = s.executeQuery()) {
        if (rs.next()) {
          log.warn("PostgreSQL feed '{}': replication slot {} is still held by server process {}, a reader"
              + " whose lease is gone (frozen or cut off); ending its session (terminated: {})", feed.stream(),
              name, rs.getInt(1), rs.getBoolean(2));
        }
        return true;
      }
    }
  }

  /** The slot's confirmed position and the server's {@code wal_status} ({@code lost}: invalidated). */
  record State(long confirmed, String walStatus) {
    boolean lost() {
      return "lost".equals(walStatus);
    }
  }

  /** The slot's state, or null if it does not exist; a slot this feed cannot use is refused. */
  State state() throws SQLException {
    try (Connection c = feed.connections.connect(false);
        PreparedStatement s = c.prepareStatement(
            "SELECT confirmed_flush_lsn, wal_status, plugin, database = current_database()"
                + " FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, name);
      try (ResultSet rs = s.executeQuery()) {
        if (!rs.next()) {
          return null;
        }
        if (!rs.getBoolean(4)) {
          throw new FeedException("PostgreSQL feed '" + feed.stream() + "': replication slot " + name
              + " belongs to another database; choose another slotPrefix", null, false);
        }
        if (!"pgoutput".equals(rs.getString(3))) {
          throw new FeedException("PostgreSQL feed '" + feed.stream() + "': replication slot " + name
              + " exists with plugin " + rs.getString(3) + ", not pgoutput; drop it or choose another slotPrefix", null, false);
        }
        String confirmed = rs.getString(1);
        return new State(confirmed == null ? 0 : LogSequenceNumber.valueOf(confirmed).asLong(), rs.getString(2));
      }
    }
  }

  /** What the slot keeps and how close it is to the limit, or empty if it does not exist. */
  java.util.Optional<PostgresChangeFeed.SlotStats> stats() throws SQLException {
    try (Connection c = feed.connections.connect(false);
        PreparedStatement s = c.prepareStatement("SELECT active, wal_status,"
            + " coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, safe_wal_size"
            + " FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, name);
      try (ResultSet rs = s.executeQuery()) {
        if (!rs.next()) {
          return java.util.Optional.empty();
        }
        long safe = rs.getLong(4);
        return java.util.Optional.of(new PostgresChangeFeed.SlotStats(name, rs.getBoolean(1), rs.getString(2),
            rs.getLong(3), rs.wasNull() ? null : safe));
      }
    }
  }

  void drop() throws SQLException {
    try (Connection c = feed.connections.connect(false);
        PreparedStatement s = c.prepareStatement("SELECT pg_drop_replication_slot(?)")) {
      s.setString(1, name);
      s.execute();
    }
  }

  long create() throws SQLException {
    try (Connection c = feed.connections.connect(false)) {
      if (feed.failover) {
        requireFailover(c, feed);
      }
      try (PreparedStatement s = c.prepareStatement(feed.failover
          // slot name, plugin, temporary, two-phase, failover (PostgreSQL 17)
          ? "SELECT lsn FROM pg_create_logical_replication_slot(?, 'pgoutput', false, false, true)"
          : "SELECT lsn FROM pg_create_logical_replication_slot(?, 'pgoutput')")) {
        s.setString(1, name);
        try (ResultSet rs = s.executeQuery()) {
          rs.next();
          log.info("PostgreSQL feed '{}': created {}replication slot {} at {}", feed.stream(),
              feed.failover ? "failover " : "", name, rs.getString(1));
          return LogSequenceNumber.valueOf(rs.getString(1)).asLong();
        }
      }
    }
  }

  /** Failover slots came with PostgreSQL 17: an older server is refused, naming the setting. */
  static void requireFailover(Connection c, PostgresChangeFeedImpl feed) throws SQLException {
    try (java.sql.Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SHOW server_version_num")) {
      rs.next();
      int version = Integer.parseInt(rs.getString(1).trim());
      if (version < 170000) {
        throw new FeedException("PostgreSQL feed '" + feed.stream() + "': failover slots need PostgreSQL 17 or"
            + " later, but the server is " + version + ": turn the failover setting off", null, false);
      }
    }
  }
}
