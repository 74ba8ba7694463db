package dev.sluice.kafka.connect.source;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.SluiceSourceConfig;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.sink.DocumentMapper;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.config.ConfigValue;
import org.bson.BsonDocument;
import org.bson.json.JsonMode;
import org.bson.json.JsonWriterSettings;

/**
 * MongoDB collections: one client for the connector or task, one change stream feed per
 * collection (the partitions of a collection that one task holds share its cursor, ADR 0074).
 * Nothing to confirm: a resume token needs no acknowledgement.
 */
final class MongoConnectSource implements ConnectSource<BsonDocument> {
  private static final JsonWriterSettings RELAXED = JsonWriterSettings.builder().outputMode(JsonMode.RELAXED).build();

  private final SluiceSourceConfig config;
  private final MongoClient client;

  MongoConnectSource(SluiceSourceConfig config) {
    this.config = config;
    this.client = MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(config.uri()))
        .applyToClusterSettings(b -> b.serverSelectionTimeout(10, TimeUnit.SECONDS))
        .build());
  }

  @Override
  public MongoChangeFeed feed(String collection) {
    return MongoChangeFeed.builder(client, config.database(), collection)
        .batchSize(config.batchSize())
        .fullDocument(config.fullDocument())
        .fullDocumentBeforeChange(config.fullDocumentBeforeChange())
        .onMissingImage(config.missingImagePark() ? MongoChangeFeed.OnMissingImage.PARK : MongoChangeFeed.OnMissingImage.STOP)
        .build();
  }

  @Override
  public String json(BsonDocument document) {
    return document.toJson(RELAXED);
  }

  @Override
  public DocumentMapper<BsonDocument> mapper() {
    return DocumentMapper.bson();
  }

  @Override
  public boolean confirmsOffsets() {
    return false;
  }

  /** The database can be listed, every collection exists, the partition count and modes suit the feed. */
  @Override
  public void validate(Map<String, ConfigValue> values) {
    Set<String> existing = new HashSet<>();
    try {
      client.getDatabase(config.database()).listCollectionNames().into(existing);
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
      MongoChangeFeed feed = feed(c);
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

  @Override
  public void close() {
    client.close();
  }
}
