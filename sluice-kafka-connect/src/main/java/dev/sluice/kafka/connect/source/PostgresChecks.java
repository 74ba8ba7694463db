package dev.sluice.kafka.connect.source;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.kafka.connect.SluiceSourceConfig;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.source.PostgresBackend;
import java.sql.Array;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.common.config.ConfigValue;

/**
 * The connector's checks of a PostgreSQL source ({@link ConnectSource}), whose feeds read through
 * replication slots named after the connector ({@code <slot.prefix>_<database>_<connector>_<table>_<i>of<n>}).
 * A slot keeps WAL until it is told how far its reader got, so tasks confirm their committed
 * offsets to it ({@link #confirmsOffsets}) and never anything beyond.
 */
record PostgresChecks(SluiceSourceConfig config, PostgresBackend backend) implements ConnectSource.Checks {

  @Override
  public boolean confirmsOffsets() {
    return true;
  }

  /**
   * Each table: the server is reachable with {@code wal_level=logical}, the publication exists
   * and publishes the table, which has a replica identity. Then the server has a replication slot
   * and a WAL sender for every partition of every table (beyond those other readers use).
   */
  @Override
  public void validate(Map<String, ConfigValue> values) {
    List<String> slots = new ArrayList<>();
    for (String table : config.streams()) {
      PostgresChangeFeed feed = backend.feed(table).forGroup(config.connectorName());
      try {
        feed.verify();
      } catch (FeedException e) {
        values.get(keyOf(e)).addErrorMessage(e.getMessage());
        return;
      }
      for (int i = 0; i < config.partitions(); i++) {
        slots.add(feed.slotName(new PartitionSpec(i, config.partitions())));
      }
    }
    Properties p = new Properties();
    if (config.postgresUser() != null) {
      p.setProperty("user", config.postgresUser());
    }
    if (config.postgresPassword() != null) {
      p.setProperty("password", config.postgresPassword());
    }
    p.setProperty("connectTimeout", "10");
    p.setProperty("socketTimeout", "30");
    try (Connection c = DriverManager.getConnection(config.postgresUrl(), p);
        PreparedStatement s = c.prepareStatement("SELECT current_setting('max_replication_slots')::int,"
            + " (SELECT count(*) FROM pg_replication_slots WHERE NOT slot_name = ANY(?)),"
            + " current_setting('max_wal_senders')::int,"
            + " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'walsender' AND pid NOT IN"
            + "   (SELECT active_pid FROM pg_replication_slots WHERE slot_name = ANY(?) AND active_pid IS NOT NULL))")) {
      Array names = c.createArrayOf("text", slots.toArray());
      s.setArray(1, names);
      s.setArray(2, names);
      try (ResultSet rs = s.executeQuery()) {
        rs.next();
        int maxSlots = rs.getInt(1);
        int otherSlots = rs.getInt(2);
        int maxSenders = rs.getInt(3);
        int otherSenders = rs.getInt(4);
        if (slots.size() > maxSlots - otherSlots) {
          values.get(SluiceSourceConfig.PARTITIONS).addErrorMessage("Reading " + config.streams().size()
              + " table(s) in " + config.partitions() + " partition(s) takes " + slots.size() + " replication slots"
              + " (one per table and partition), but the server allows max_replication_slots=" + maxSlots
              + " and " + otherSlots + " are other readers'. Lower " + SluiceSourceConfig.PARTITIONS
              + " or raise max_replication_slots (a server restart).");
        }
        if (slots.size() > maxSenders - otherSenders) {
          values.get(SluiceSourceConfig.PARTITIONS).addErrorMessage("Reading " + slots.size() + " partitions at"
              + " once takes as many WAL senders, but the server allows max_wal_senders=" + maxSenders + " and "
              + otherSenders + " are in use by others. Lower " + SluiceSourceConfig.PARTITIONS
              + " or raise max_wal_senders (a server restart).");
        }
      }
    } catch (SQLException e) {
      values.get(SluiceSourceConfig.POSTGRES_URL).addErrorMessage("Cannot read the server's replication limits: "
          + e.getMessage());
    }
  }

  /** The key a failed check belongs to: the publication, the tables, or else the server (the URL). */
  private static String keyOf(FeedException e) {
    String m = String.valueOf(e.getMessage());
    if (e.retryable() || m.contains("wal_level")) {
      return SluiceSourceConfig.POSTGRES_URL;
    }
    if (m.contains("publication ") && m.contains("does not exist")) {
      return SluiceSourceConfig.POSTGRES_PUBLICATION;
    }
    return SluiceSourceConfig.POSTGRES_TABLES;
  }

  /**
   * Drops each table's slot of each partition of this connector. The slots no reader holds go at
   * once; one a task still holds (the connector and its tasks stop in no set order) is waited for
   * until {@code wait} passes, then left with a warning: the server refuses to drop a slot in use,
   * and it is never forced.
   */
  @Override
  public List<String> dropSlots(java.time.Duration wait) {
    Map<String, PostgresChangeFeed> remaining = new java.util.LinkedHashMap<>();
    for (String table : config.streams()) {
      PostgresChangeFeed feed = backend.feed(table).forGroup(config.connectorName());
      for (int i = 0; i < config.partitions(); i++) {
        remaining.put(feed.slotName(new PartitionSpec(i, config.partitions())), feed);
      }
    }
    List<String> dropped = new ArrayList<>();
    long deadline = System.nanoTime() + wait.toNanos();
    while (true) {
      for (var it = remaining.entrySet().iterator(); it.hasNext(); ) {
        var e = it.next();
        java.util.Optional<PostgresChangeFeed.SlotStats> stats = e.getValue().slotsOfPrefix().stream()
            .filter(s -> s.slot().equals(e.getKey())).findFirst();
        if (stats.isEmpty()) {
          it.remove();
        } else if (!stats.get().active()) {
          try {
            e.getValue().dropSlot(e.getKey());
            dropped.add(e.getKey());
            it.remove();
          } catch (FeedException ex) {
            log.debug("Connector '{}': replication slot {} not dropped yet: {}", config.connectorName(), e.getKey(),
                ex.getMessage());
          }
        }
      }
      if (remaining.isEmpty()) {
        return dropped;
      }
      if (System.nanoTime() > deadline) {
        log.warn("Connector '{}': replication slots {} are still held by a reader after {}; not dropped (drop them"
            + " once free: sluice slots --drop, or SELECT pg_drop_replication_slot(name))", config.connectorName(),
            remaining.keySet(), wait);
        return dropped;
      }
      java.util.concurrent.locks.LockSupport.parkNanos(java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(100));
    }
  }

  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(PostgresChecks.class);
}
