package dev.sluice.postgres.feed;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.SourceHistory;
import dev.sluice.feed.StartPoint;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import org.postgresql.PGProperty;

/**
 * The {@link PostgresChangeFeed} (its javadoc says what it reads and what the server needs): the
 * settings of one feed, shared by the package-private parts that read it ({@code PgFeedCursor}
 * and the classes it uses); built only by {@link PostgresChangeFeed.Builder#build()} (ADR 0118).
 */
final class PostgresChangeFeedImpl implements PostgresChangeFeed {
  final String url;
  /** The URL of replication connections: {@link #url} unless set apart (ADR 0107). */
  final String replicationUrl;
  final String user;
  final String password;
  final String publication;
  final String table;
  final String stream;
  final String slotPrefix;
  final int batchSize;
  final Duration statusInterval;
  /** How long the replication connection may stay silent, asked every status interval, before it is given up (ADR 0106). */
  final Duration replicationTimeout;
  final boolean failover;
  /** Prefixes of the logical-decoding messages delivered; empty: none asked for (ADR 0096). */
  final List<String> messagePrefixes;
  /** Whether row changes are delivered (false: only messages). */
  final boolean rows;
  /** The connections this feed opens, each with its settings. */
  final PgConnections connections;
  /** The thread keeping this feed's replication connections alive while nobody reads them. */
  final PgKeepAlives keepAlives;

  PostgresChangeFeedImpl(PostgresChangeFeed.Builder b) {
    this.url = b.url;
    this.replicationUrl = b.replicationUrl != null ? b.replicationUrl : b.url;
    this.user = b.user;
    this.password = b.password;
    this.publication = b.publication;
    this.table = b.table;
    this.stream = b.stream != null ? b.stream : b.table != null ? b.table : b.publication;
    this.slotPrefix = b.slotPrefix;
    this.batchSize = b.batchSize;
    this.statusInterval = b.statusInterval;
    this.replicationTimeout = b.replicationTimeout;
    this.failover = b.failover;
    this.messagePrefixes = b.messagePrefixes;
    this.rows = b.rows;
    Properties parsed = org.postgresql.Driver.parseURL(b.url, null);
    this.database = parsed == null ? "" : parsed.getProperty(PGProperty.PG_DBNAME.getName(), "");
    this.group = null;
    this.connections = new PgConnections(url, replicationUrl, user, password, stream, replicationTimeout);
    this.keepAlives = new PgKeepAlives(stream);
  }

  private PostgresChangeFeedImpl(PostgresChangeFeedImpl base, String group) {
    this.url = base.url;
    this.replicationUrl = base.replicationUrl;
    this.user = base.user;
    this.password = base.password;
    this.publication = base.publication;
    this.table = base.table;
    this.stream = base.stream;
    this.slotPrefix = base.slotPrefix;
    this.batchSize = base.batchSize;
    this.statusInterval = base.statusInterval;
    this.replicationTimeout = base.replicationTimeout;
    this.failover = base.failover;
    this.messagePrefixes = base.messagePrefixes;
    this.rows = base.rows;
    this.database = base.database;
    this.group = group;
    this.connections = base.connections;
    this.keepAlives = new PgKeepAlives(stream);
  }

  /** Whether the server should send logical-decoding messages to this feed. */
  boolean wantsMessages() {
    return !messagePrefixes.isEmpty();
  }

  /** Whether a message of {@code prefix} is delivered. */
  boolean delivers(String prefix) {
    for (String p : messagePrefixes) {
      if (prefix.startsWith(p)) {
        return true;
      }
    }
    return false;
  }

  /** The consumer group whose slots this feed reads, or null when used without a listener. */
  final String group;

  @Override
  public PostgresChangeFeed forGroup(String group) {
    Objects.requireNonNull(group, "group");
    return group.equals(this.group) ? this : new PostgresChangeFeedImpl(this, group);
  }

  /** Every start point but a time (WAL is not indexed by time). */
  @Override
  public boolean supports(StartPoint start) {
    return !(start instanceof StartPoint.AtTime) && (rows || !(start instanceof StartPoint.Snapshot));
  }

  /** The database the URL names: slots belong to one database, so it is part of their names. */
  final String database;

  @Override
  public String stream() {
    return stream;
  }

  @Override
  public FeedCursor<Map<String, Object>> open(PartitionSpec partition, StartPoint start) {
    Objects.requireNonNull(partition, "partition");
    Objects.requireNonNull(start, "start");
    PgFeedCursor cursor = new PgFeedCursor(this, partition, slotName(partition));
    cursor.start(start);
    return cursor;
  }

  /** The source's clock; the oldest retained change is not known (the slot keeps what it needs). */
  @Override
  public SourceHistory history() {
    try (Connection c = connections.connect(false); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT now()")) {
      rs.next();
      return new SourceHistory(null, rs.getTimestamp(1).toInstant());
    } catch (SQLException e) {
      throw new FeedException("PostgreSQL feed '" + stream + "': cannot read the server's clock: " + e.getMessage(), e, true);
    }
  }

  @Override
  public Iterable<CurrentRow> currentRows(int chunk) {
    ConfigurationException.require(chunk >= 1, "chunk", chunk, "must be >= 1");
    return () -> new PgCurrentRows(this, chunk);
  }

  @Override
  public java.util.Optional<SlotStats> slot(PartitionSpec partition) {
    PgSlot slot = new PgSlot(this, slotName(partition));
    try {
      return slot.stats();
    } catch (SQLException e) {
      throw new FeedException("PostgreSQL feed '" + stream + "': cannot read the state of slot " + slot.name + ": "
          + e.getMessage(), e, true);
    }
  }

  @Override
  public List<SlotStats> slotsOfPrefix() {
    String start = (slotPrefix + "_" + database + "_").toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
    try (Connection c = connections.connect(false);
        PreparedStatement s = c.prepareStatement("SELECT slot_name, active, wal_status,"
            + " coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, safe_wal_size"
            + " FROM pg_replication_slots WHERE database = current_database() AND slot_type = 'logical'"
            + " AND starts_with(slot_name, ?) ORDER BY slot_name")) {
      s.setString(1, start);
      try (ResultSet rs = s.executeQuery()) {
        List<SlotStats> out = new java.util.ArrayList<>();
        while (rs.next()) {
          long safe = rs.getLong(5);
          out.add(new SlotStats(rs.getString(1), rs.getBoolean(2), rs.getString(3), rs.getLong(4),
              rs.wasNull() ? null : safe));
        }
        return out;
      }
    } catch (SQLException e) {
      throw new FeedException("PostgreSQL feed '" + stream + "': cannot list the replication slots starting with "
          + start + ": " + e.getMessage(), e, true);
    }
  }

  @Override
  public void dropSlot(String name) {
    String start = (slotPrefix + "_" + database + "_").toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
    ConfigurationException.require(name != null && name.startsWith(start), "slot", name,
        "must be a slot of this feed's prefix (" + start + "...)");
    try {
      new PgSlot(this, name).drop();
    } catch (SQLException e) {
      throw new FeedException("PostgreSQL feed '" + stream + "': cannot drop replication slot " + name + ": "
          + e.getMessage(), e, false);
    }
  }

  @Override
  public String slotName(PartitionSpec partition) {
    String suffix = "_" + partition.index() + "of" + partition.count();
    String full = slotPrefix + "_" + database + (group == null ? "" : "_" + group) + "_" + stream;
    String name = full.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9_]", "_");
    if (name.length() + suffix.length() > 63) {
      name = name.substring(0, 63 - suffix.length() - 9) + "_" + hash(full);
    }
    return name + suffix;
  }

  /**
   * The replication slots of a layout of {@code partitions} partitions of this feed's group, which
   * keep WAL until dropped, with how to drop them: for the error that refuses a change of the
   * partition count (and, with the group, of a group that is given up).
   */
  @Override
  public String keptByLayout(int partitions) {
    List<String> names = new java.util.ArrayList<>();
    for (int i = 0; i < partitions; i++) {
      names.add(slotName(new PartitionSpec(i, partitions)));
    }
    String shown = names.size() <= 8 ? String.join(", ", names)
        : String.join(", ", names.subList(0, 4)) + ", ... " + names.get(names.size() - 1);
    return "The " + partitions + "-partition layout's replication slots keep WAL on the server until they are"
        + " dropped: " + shown + ". Drop them once no member uses them: 'sluice slots --config <file> --drop'"
        + " drops every slot no live lease uses, or SELECT pg_drop_replication_slot('" + names.get(0) + "') for each";
  }

  private static String hash(String text) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
      return HexFormat.of().formatHex(digest, 0, 4);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void verify() {
    try {
      new PgPublicationCheck(this).run();
    } catch (SQLException e) {
      throw new FeedException("PostgreSQL feed '" + stream + "': cannot check the server: "
          + e.getMessage(), e, true);
    }
  }

  @Override
  public String toString() {
    return "PostgresChangeFeed[" + stream + ", publication " + publication + "]";
  }
}
