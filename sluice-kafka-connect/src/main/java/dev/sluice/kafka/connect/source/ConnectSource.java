package dev.sluice.kafka.connect.source;

import dev.sluice.feed.ChangeFeed;
import dev.sluice.kafka.connect.SluiceSourceConfig;
import dev.sluice.sink.DocumentMapper;
import java.util.Map;
import org.apache.kafka.common.config.ConfigValue;

/**
 * The database a connector reads, behind one interface: the feed of each configured stream (a
 * MongoDB collection, a PostgreSQL table), how its documents are written as JSON, the checks
 * {@code validate} runs against the server, and whether the source must be told how far Connect
 * committed.
 *
 * @param <D> the feed's document type
 */
public interface ConnectSource<D> extends AutoCloseable {

  /** The source {@code config} names ({@link SluiceSourceConfig#SOURCE_TYPE}). */
  static ConnectSource<?> open(SluiceSourceConfig config) {
    return config.postgres() ? new PostgresConnectSource(config) : new MongoConnectSource(config);
  }

  /** The feed of {@code stream} (a name from {@link SluiceSourceConfig#streams()}), as configured. */
  ChangeFeed<D> feed(String stream);

  /** {@code document} as JSON text (the value struct's document fields). */
  String json(D document);

  /** The envelope encoder's document mapper (value.format=envelope), the one Sluice's relays use. */
  DocumentMapper<D> mapper();

  /**
   * Whether a task must confirm its committed offsets to the source ({@code
   * FeedCursor.acknowledge}): a PostgreSQL slot keeps WAL until it is told, and must never be told
   * more than Connect committed, or a restarted task would find the WAL it resumes from recycled.
   */
  boolean confirmsOffsets();

  /**
   * The checks that need the server (reachable, every stream exists, enough server resources for
   * the partitions), each error added under its key in {@code values}. Called with a
   * configuration whose own values are valid.
   */
  void validate(Map<String, ConfigValue> values);

  /**
   * Drops what the connector keeps on the source for its streams and partitions (PostgreSQL: the
   * replication slots), waiting up to {@code wait} for each to be let go by its reader; returns
   * the names dropped. Nothing by default.
   */
  default java.util.List<String> dropSlots(java.time.Duration wait) {
    return java.util.List.of();
  }

  @Override
  void close();
}
