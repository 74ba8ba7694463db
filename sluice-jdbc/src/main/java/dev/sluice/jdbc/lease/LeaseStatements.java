package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * The SQL the store runs on its table, except the one-statement acquisition (a dialect's
 * {@link SqlDialect#acquireStatement}): reading a row with the database's clock, the
 * compare-and-swap update, the insert of a new row, release and the conditional deletes (which
 * notify, {@link ReleaseNotices}), and how the table stores time. Each method runs on the
 * connection and in the transaction it is given.
 */
final class LeaseStatements {
  private static final String COLUMNS =
      "t.name, t.owner, t.epoch, t.expires_at, t.version, t.checkpoint, t.checkpoint_time";

  private final String table;
  private final ReleaseNotices notices;

  LeaseStatements(String table, ReleaseNotices notices) {
    this.table = table;
    this.notices = notices;
  }

  /** A lease row (name null if absent) as read, with the database's clock at the read. */
  record Row(String name, String owner, long epoch, Instant expiresAt, long version,
      Position checkpoint, Instant now) {
    boolean heldBySomeoneAt() {
      return owner != null && expiresAt != null && expiresAt.isAfter(now);
    }

    boolean matches(Lease lease) {
      return lease.owner().equals(owner) && lease.epoch() == epoch;
    }

    LeaseRecord toRecord() {
      return new LeaseRecord(name, owner, epoch, expiresAt, checkpoint, now);
    }
  }

  @FunctionalInterface
  interface Binder {
    /** Binds the SET parameters and returns the index of the first WHERE parameter. */
    int bind(PreparedStatement ps) throws SQLException;
  }

  @FunctionalInterface
  interface WhereBinder {
    /** Binds the condition's parameters from {@code firstIndex} on; returns the next free index. */
    int bind(PreparedStatement ps, int firstIndex) throws SQLException;
  }

  // Time as the table stores it ------------------------------------------------------------------

  static long micros(Instant dbNow) {
    return Math.addExact(Math.multiplyExact(dbNow.getEpochSecond(), 1_000_000L),
        dbNow.getNano() / 1_000);
  }

  static Instant expiry(Instant dbNow, Duration duration) {
    // Truncated to what both databases store, so the lease we return equals the stored row.
    return dbNow.plus(duration).truncatedTo(ChronoUnit.MICROS);
  }

  static long durationMicros(Duration duration) {
    try {
      return Math.addExact(Math.multiplyExact(duration.getSeconds(), 1_000_000L),
          duration.getNano() / 1_000);
    } catch (ArithmeticException e) {
      throw new ConfigurationException("duration " + duration + " is too long for the lease table");
    }
  }

  // Reads ----------------------------------------------------------------------------------------

  /** The row (name null if absent) and the database's clock, in one round trip. */
  Row select(Connection c, SqlDialect d, String name) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("SELECT " + COLUMNS + ", " + d.now
        + " FROM (SELECT 1 AS one) o LEFT JOIN " + table + " t ON t.name = ?")) {
      ps.setString(1, name);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return row(rs, d);
      }
    }
  }

  /** The row if it is still this lease's (owner and epoch); otherwise the lease is lost. */
  Row selectMatching(Connection c, SqlDialect d, Lease lease) throws SQLException {
    Row row = select(c, d, lease.name());
    if (row.name() == null) {
      throw new LeaseLostException(lease.name(), lease.epoch(), "no lease row");
    }
    if (!row.matches(lease)) {
      throw new LeaseLostException(lease.name(), lease.epoch(),
          row.owner() == null ? "released (now epoch " + row.epoch() + ")"
              : "now held by " + row.owner() + " with epoch " + row.epoch());
    }
    return row;
  }

  /** The LIKE pattern (escape '!') of every name that starts with {@code prefix}. */
  static String prefixPattern(String prefix) {
    return prefix.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%";
  }

  /** The records whose names match {@code pattern} (LIKE with escape '!'), in the database's order. */
  List<LeaseRecord> list(Connection c, SqlDialect d, String pattern) throws SQLException {
    List<LeaseRecord> records = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement("SELECT " + COLUMNS + ", " + d.now
        + " FROM " + table + " t WHERE t.name LIKE ? ESCAPE '!'")) {
      ps.setString(1, pattern);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          records.add(row(rs, d).toRecord());
        }
      }
    }
    return records;
  }

  /** The database's clock. */
  static Instant now(Connection c, SqlDialect d) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT " + d.now)) {
      rs.next();
      return d.getTime(rs, 1);
    }
  }

  private static Row row(ResultSet rs, SqlDialect d) throws SQLException {
    String token = rs.getString(6);
    Position checkpoint = token == null ? null : new Position(token, d.getTime(rs, 7));
    return new Row(rs.getString(1), rs.getString(2), rs.getLong(3), d.getTime(rs, 4),
        rs.getLong(5), checkpoint, d.getTime(rs, 8));
  }

  // Writes ---------------------------------------------------------------------------------------

  /** A new row, version 1, no checkpoint (the read-then-write acquisition of a name never held). */
  void insert(Connection c, SqlDialect d, String name, String owner, long epoch, Instant expiresAt)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("INSERT INTO " + table
        + " (name, owner, epoch, expires_at, version, checkpoint, checkpoint_time)"
        + " VALUES (?, ?, ?, ?, 1, NULL, NULL)")) {
      ps.setString(1, name);
      ps.setString(2, owner);
      ps.setLong(3, epoch);
      d.setTime(ps, 4, expiresAt);
      ps.executeUpdate();
    }
  }

  /**
   * The compare-and-swap: writes {@code row}'s record only if it is still the one read, same
   * version <em>and</em> epoch; otherwise {@link CasTransactions.CasFailed}. Under REPEATABLE
   * READ, PostgreSQL raises a serialization failure if the row changed since the snapshot; InnoDB
   * re-reads the latest version for the UPDATE and matches zero rows. Both mean someone else
   * wrote first. The version alone is not enough: a record deleted (deleteIfIdle, delete) and
   * inserted again starts at version 1 again, and MariaDB's UPDATE reads the newest committed row,
   * not the transaction's snapshot, so a CAS on version 1 would overwrite the new record of
   * someone else; the new record's epoch is always higher than the deleted one's.
   */
  void casUpdate(Connection c, String set, Row row, Binder binder)
      throws SQLException, CasTransactions.CasFailed {
    try (PreparedStatement ps = c.prepareStatement("UPDATE " + table + " SET " + set
        + ", version = version + 1 WHERE name = ? AND version = ? AND epoch = ?")) {
      int i = binder.bind(ps);
      ps.setString(i, row.name());
      ps.setLong(i + 1, row.version());
      ps.setLong(i + 2, row.epoch());
      if (ps.executeUpdate() != 1) {
        throw new CasTransactions.CasFailed();
      }
    }
  }

  /**
   * One conditional {@code UPDATE} on owner and epoch (every acquisition changes the epoch, so a
   * release after a takeover matches nothing); keeps epoch and checkpoint for the next holder.
   * Notifies the release; commits.
   */
  boolean release(Connection c, SqlDialect d, Lease lease) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(ReleaseNotices.notifying(d, "UPDATE " + table
        + " SET owner = NULL, expires_at = NULL, version = version + 1"
        + " WHERE name = ? AND owner = ? AND epoch = ?"))) {
      ps.setString(1, lease.name());
      ps.setString(2, lease.owner());
      ps.setLong(3, lease.epoch());
      return notices.changedAndCommitted(c, d, ps, 4) == 1;
    }
  }

  /**
   * One conditional {@code DELETE} of {@code name} where {@code condition} holds and the row's
   * epoch is below the database clock in microseconds (so that the epoch a re-created row starts
   * with is above it). Notifies the deletion; commits.
   */
  boolean deleteWhere(Connection c, SqlDialect d, String name,
      Function<SqlDialect, String> condition, WhereBinder binder) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(ReleaseNotices.notifying(d, "DELETE FROM "
        + table + " WHERE name = ? AND epoch < " + d.nowMicros + " AND " + condition.apply(d)))) {
      ps.setString(1, name);
      return notices.changedAndCommitted(c, d, ps, binder.bind(ps, 2)) == 1;
    }
  }
}
