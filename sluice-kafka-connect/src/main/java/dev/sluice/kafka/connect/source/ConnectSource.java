package dev.sluice.kafka.connect.source;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.kafka.connect.SluiceSourceConfig;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.source.MongoBackend;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.postgres.source.PostgresBackend;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.source.SourceBackend;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.common.config.ConfigValue;

/**
 * The database a connector reads: the shared {@link SourceBackend} built from the connector's keys
 * (ADR 0128), with what is the connector's own: the checks {@code validate} runs against the server
 * (their errors under the connector's keys), whether the source must be told how far Connect
 * committed, and dropping the connector's slots when it is deleted.
 *
 * @param <D> the feed's document type
 */
public final class ConnectSource<D> implements AutoCloseable {
  private final SourceBackend<D> backend;
  private final DocumentMapper<D> mapper;
  private final Checks checks;

  private ConnectSource(SourceBackend<D> backend, DocumentMapper<D> mapper, Checks checks) {
    this.backend = backend;
    this.mapper = mapper;
    this.checks = checks;
  }

  /** The source {@code config} names ({@link SluiceSourceConfig#SOURCE_TYPE}). */
  public static ConnectSource<?> open(SluiceSourceConfig config) {
    if (config.postgres()) {
      PostgresBackend b = PostgresBackend.builder(config.postgresUrl(), config.postgresUser(),
              config.postgresPassword(), config.publication())
          .messagesStream(SluiceSourceConfig.MESSAGES_STREAM, config.messagePrefixes())
          .slotPrefix(config.slotPrefix())
          .failover(config.slotFailover())
          .batchSize(config.batchSize())
          .build();
      return new ConnectSource<>(b, PostgresDocuments.mapper(), new PostgresChecks(config, b));
    }
    MongoBackend b = MongoBackend.builder(MongoClientSettings.builder()
                .applyConnectionString(new ConnectionString(config.uri()))
                .applyToClusterSettings(s -> s.serverSelectionTimeout(10, TimeUnit.SECONDS))
                .build(), config.database())
        .batchSize(config.batchSize())
        .fullDocument(config.fullDocument())
        .fullDocumentBeforeChange(config.fullDocumentBeforeChange())
        .onMissingImage(config.missingImagePark() ? MongoChangeFeed.OnMissingImage.PARK
            : MongoChangeFeed.OnMissingImage.STOP)
        .build();
    return new ConnectSource<>(b, DocumentMapper.bson(), new MongoChecks(config, b));
  }

  /** The feed of {@code stream} (a name from {@link SluiceSourceConfig#streams()}), as configured. */
  public ChangeFeed<D> feed(String stream) {
    return backend.feed(stream);
  }

  /** {@code document} as JSON text (the value struct's document fields). */
  public String json(D document) {
    return backend.json(document);
  }

  /** The envelope encoder's document mapper (value.format=envelope), the one Sluice's relays use. */
  public DocumentMapper<D> mapper() {
    return mapper;
  }

  /**
   * Whether a task must confirm its committed offsets to the source ({@code
   * FeedCursor.acknowledge}): a PostgreSQL slot keeps WAL until it is told, and must never be told
   * more than Connect committed, or a restarted task would find the WAL it resumes from recycled.
   * A MongoDB resume token needs no acknowledgement.
   */
  public boolean confirmsOffsets() {
    return checks.confirmsOffsets();
  }

  /**
   * The checks that need the server (reachable, every stream exists, enough server resources for
   * the partitions), each error added under its key in {@code values}. Called with a
   * configuration whose own values are valid.
   */
  public void validate(Map<String, ConfigValue> values) {
    checks.validate(values);
  }

  /**
   * Drops what the connector keeps on the source for its streams and partitions (PostgreSQL: the
   * replication slots), waiting up to {@code wait} for each to be let go by its reader; returns
   * the names dropped.
   */
  public List<String> dropSlots(Duration wait) {
    return checks.dropSlots(wait);
  }

  @Override
  public void close() {
    backend.close();
  }

  /** What the connector does with a backend that is the connector's own. */
  interface Checks {
    boolean confirmsOffsets();

    void validate(Map<String, ConfigValue> values);

    default List<String> dropSlots(Duration wait) {
      return List.of();
    }
  }
}
