package dev.sluice.kafka.connect.source;

import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.SluiceSourceConfig;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.source.MongoBackend;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.config.ConfigValue;

/**
 * The connector's checks of a MongoDB source ({@link ConnectSource}): the collections exist, the
 * partition count and modes suit the feed. Nothing to confirm: a resume token needs no
 * acknowledgement.
 */
record MongoChecks(SluiceSourceConfig config, MongoBackend backend) implements ConnectSource.Checks {

  @Override
  public boolean confirmsOffsets() {
    return false;
  }

  /** The database can be listed, every collection exists, the partition count and modes suit the feed. */
  @Override
  public void validate(Map<String, ConfigValue> values) {
    Set<String> existing = new HashSet<>();
    try {
      backend.database().listCollectionNames().into(existing);
    } catch (RuntimeException e) {
      values.get(SluiceSourceConfig.MONGODB_URI).addErrorMessage(
          "Cannot list the collections of database '" + config.database() + "' through this connection string: "
              + e.getMessage());
      return;
    }
    List<String> unknown = new ArrayList<>();
    for (String c : config.streams()) {
      if (!existing.contains(c)) {
        unknown.add(c);
      }
    }
    if (!unknown.isEmpty()) {
      values.get(SluiceSourceConfig.COLLECTIONS).addErrorMessage("Database '" + config.database()
          + "' has no collection " + unknown + " (it has " + existing.size() + ": "
          + existing.stream().sorted().limit(20).toList() + "). Create it first: a change stream on a"
          + " collection that does not exist yet is legal, but a misspelt name would read nothing forever.");
    }
    for (String c : config.streams()) {
      MongoChangeFeed feed = backend.feed(c);
      if (config.partitions() > feed.maxPartitions()) {
        values.get(SluiceSourceConfig.PARTITIONS).addErrorMessage("The feed of " + feed.stream() + " serves at most "
            + feed.maxPartitions() + " partitions, but " + config.partitions() + " were asked for");
      }
      if (config.startupMode().equals("snapshot") && !feed.supports(StartPoint.snapshot())) {
        values.get(SluiceSourceConfig.STARTUP_MODE).addErrorMessage("The feed of " + feed.stream()
            + " cannot read a snapshot with these settings");
      }
      if (config.historyLostPolicy().equals("resnapshot") && !feed.supports(StartPoint.snapshot())) {
        values.get(SluiceSourceConfig.HISTORY_LOST_POLICY).addErrorMessage("resnapshot needs a feed that reads"
            + " snapshots; the feed of " + feed.stream() + " cannot with these settings");
      }
    }
  }
}
