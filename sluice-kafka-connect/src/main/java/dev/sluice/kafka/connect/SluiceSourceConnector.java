package dev.sluice.kafka.connect;

import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.internal.Offsets;
import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.kafka.connect.source.ConnectSource;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.storage.OffsetStorageReader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sluice's change feeds as a Kafka Connect source connector: the changes of one or more MongoDB
 * collections, each split into {@link SluiceSourceConfig#PARTITIONS} partitions by a stable hash
 * of the document key, published to {@code <topic.prefix>.<database>.<collection>} in per-key
 * order. Connect's workers distribute the tasks, store the offsets and (with {@code
 * exactly.once.source.support=enabled}, KIP-618) commit each task's records and offsets in one
 * transaction and fence zombie tasks; see {@code docs/adr/0078-kafka-connect-source-connector.md}.
 *
 * <ul>
 *   <li>Tasks: the (collection, partition) pairs are spread round-robin over {@code tasks.max}
 *       tasks, so the partitions of one collection run on different tasks and workers.
 *   <li>Source partition {@code {stream, partition, partitions}}; source offset {@code {position,
 *       time, epoch}}: the feed's resume position, from which a restarted task continues with
 *       {@code StartPoint.after}.
 *   <li>Key: the document key (Sluice's canonical string, as the Kafka relay uses). Value: a
 *       {@code dev.sluice.kafka.connect.Change} struct with the envelope's fields, or the envelope
 *       as a string ({@code value.format=envelope}). Headers: the relay's {@code sluice-*} headers.
 * </ul>
 */
public final class SluiceSourceConnector extends SourceConnector {
  private static final Logger log = LoggerFactory.getLogger(SluiceSourceConnector.class);

  /** The connector's version: Sluice's. */
  public static final String VERSION = versionOf();

  private Map<String, String> props;
  private SluiceSourceConfig config;

  @Override
  public String version() {
    return VERSION;
  }

  private static String versionOf() {
    String v = SluiceSourceConnector.class.getPackage().getImplementationVersion();
    return v == null ? "0.1.0-SNAPSHOT" : v;
  }

  @Override
  public void start(Map<String, String> props) {
    this.props = Map.copyOf(props);
    this.config = new SluiceSourceConfig(props);
    // Refuse a partition count change here already, where the connector's status shows it.
    if (config.partitionsChange().equals("fail") && context() != null) {
      try (ConnectSource<?> source = ConnectSource.open(config)) {
        for (String s : config.streams()) {
          startFor(context().offsetStorageReader(), config, source.feed(s).forGroup(config.connectorName()));
        }
      }
    }
  }

  @Override
  public Class<? extends Task> taskClass() {
    return SluiceSourceTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    List<Map<String, String>> configs = new ArrayList<>();
    List<List<Unit>> shares = Unit.spread(Unit.all(config.streams(), config.partitions()), maxTasks);
    for (int t = 0; t < shares.size(); t++) {
      Map<String, String> task = new HashMap<>(props);
      task.put(SluiceSourceConfig.TASK_UNITS, Unit.encode(shares.get(t)));
      task.put(SluiceSourceConfig.TASK_INDEX, Integer.toString(t));
      configs.add(task);
    }
    return configs;
  }

  /**
   * With {@code postgres.slot.drop.on.stop}, drops the connector's replication slots: Connect
   * stops a connector that is deleted without saying so, so the property is the operator's word
   * that this stop is the last (see its documentation).
   */
  @Override
  public void stop() {
    if (config == null || !config.postgres() || !config.dropSlotsOnStop()) {
      return;
    }
    try (ConnectSource<?> source = ConnectSource.open(config)) {
      List<String> dropped = source.dropSlots(java.time.Duration.ofSeconds(30));
      log.warn("Connector '{}' stopped with {}=true: dropped its replication slots {}; a later start of it meets"
          + " lost history", config.connectorName(), SluiceSourceConfig.POSTGRES_SLOT_DROP_ON_STOP, dropped);
    } catch (RuntimeException e) {
      log.error("Connector '{}': cannot drop its replication slots on stop: {}", config.connectorName(), e.toString());
    }
  }

  @Override
  public ConfigDef config() {
    return SluiceSourceConfig.CONFIG_DEF;
  }

  /**
   * Connect's per-key checks, then the keys the source type requires or forbids, then those that
   * need the database ({@link ConnectSource#validate}: it can be reached, every stream exists, the
   * partitions fit the feed and the server). Each error is reported under its key.
   */
  @Override
  public Config validate(Map<String, String> connectorConfigs) {
    Config result = super.validate(connectorConfigs);
    Map<String, ConfigValue> values = new HashMap<>();
    for (ConfigValue v : result.configValues()) {
      values.put(v.name(), v);
    }
    if (hasErrors(values, SluiceSourceConfig.SOURCE_TYPE, SluiceSourceConfig.PARTITIONS_CHANGE)) {
      return result;
    }
    SluiceSourceConfig cfg;
    try {
      cfg = SluiceSourceConfig.withoutSourceCheck(connectorConfigs);
    } catch (ConfigException e) {
      return result; // already reported per key
    }
    String[] wrong = cfg.wrongSourceKey();
    if (wrong != null) {
      values.get(wrong[0]).addErrorMessage(wrong[0] + " " + wrong[1]);
      return result;
    }
    List<String> needed = cfg.requiredKeys();
    if (hasErrors(values, needed.toArray(String[]::new))
        || hasErrors(values, SluiceSourceConfig.PARTITIONS, SluiceSourceConfig.STARTUP_MODE,
            SluiceSourceConfig.HISTORY_LOST_POLICY)) {
      return result;
    }
    try (ConnectSource<?> source = ConnectSource.open(cfg)) {
      source.validate(values);
    } catch (RuntimeException e) {
      values.get(needed.get(0)).addErrorMessage("Cannot reach the source: " + e.getMessage());
    }
    return result;
  }

  private static boolean hasErrors(Map<String, ConfigValue> values, String... keys) {
    for (String k : keys) {
      ConfigValue v = values.get(k);
      if (v == null || !v.errorMessages().isEmpty()) {
        return true;
      }
    }
    return false;
  }

  /**
   * {@link ExactlyOnceSupport#SUPPORTED}: a task resumes deterministically after the position in
   * its committed offset, and with exactly-once source support Connect commits that offset in the
   * same transaction as the records before it, so the topic as read with {@code read_committed}
   * holds every change once.
   */
  @Override
  public ExactlyOnceSupport exactlyOnceSupport(Map<String, String> connectorConfig) {
    return ExactlyOnceSupport.SUPPORTED;
  }

  /** Lets the offsets REST API (KIP-875) reset or move partitions, refusing malformed offsets. */
  @Override
  public boolean alterOffsets(Map<String, String> connectorConfig, Map<Map<String, ?>, Map<String, ?>> offsets) {
    for (Map.Entry<Map<String, ?>, Map<String, ?>> e : offsets.entrySet()) {
      String problem = Offsets.invalid(e.getKey(), e.getValue());
      if (problem != null) {
        throw new ConnectException(problem);
      }
    }
    return true;
  }

  /**
   * Where a partition of {@code feed}'s stream without a committed offset starts: the startup mode,
   * unless the stream has committed offsets of another partition count. Then, per {@link
   * SluiceSourceConfig#PARTITIONS_CHANGE}: fail naming both counts, or the cluster time of the
   * oldest offset of the old layout (every change after it is published again, none is lost).
   */
  static StartPoint startFor(OffsetStorageReader reader, SluiceSourceConfig config, ChangeFeed<?> feed) {
    Map<Map<String, Object>, Map<String, Object>> old =
        Offsets.otherLayout(reader, feed.stream(), config.partitions(),
            Math.min(feed.maxPartitions(), SluiceSourceConfig.MAX_PARTITIONS));
    if (old.isEmpty()) {
      return switch (config.startupMode()) {
        case "latest" -> StartPoint.latest();
        // A stream without rows (PostgreSQL's messages) has no snapshot: it starts where its slot does.
        case "snapshot" -> feed.supports(StartPoint.snapshot()) ? StartPoint.snapshot() : StartPoint.oldest();
        default -> StartPoint.oldest();
      };
    }
    Object oldCount = old.keySet().iterator().next().get(Offsets.PARTITIONS);
    if (config.partitionsChange().equals("fail")) {
      throw new ConnectException("Stream " + feed.stream() + " has committed offsets for " + oldCount
          + " partitions, but " + SluiceSourceConfig.PARTITIONS + " is " + config.partitions() + ". Another"
          + " partition count is another set of source partitions: starting them per " + SluiceSourceConfig.STARTUP_MODE
          + " could skip or repeat changes. Set " + SluiceSourceConfig.PARTITIONS + " back to " + oldCount + ", or set "
          + SluiceSourceConfig.PARTITIONS_CHANGE + "=restart-from-oldest-offset (the new partitions start at the"
          + " oldest committed position of the old ones: nothing lost, some changes published again), or use a"
          + " new connector name, which starts per " + SluiceSourceConfig.STARTUP_MODE + ".");
    }
    Instant oldest = null;
    for (Map.Entry<Map<String, Object>, Map<String, Object>> e : old.entrySet()) {
      Position p = Offsets.position(e.getValue());
      if (p.time() == null) {
        throw new ConnectException("Stream " + feed.stream() + ": the committed offset of " + e.getKey()
            + " has no cluster time, so the oldest position of the old layout cannot be told; set "
            + SluiceSourceConfig.PARTITIONS + " back to " + oldCount);
      }
      oldest = oldest == null || p.time().isBefore(oldest) ? p.time() : oldest;
    }
    log.warn("Stream {}: partition count changed from {} to {}; partitions without an offset start at {},"
        + " the oldest committed position of the old layout ({}=restart-from-oldest-offset)", feed.stream(),
        oldCount, config.partitions(), oldest, SluiceSourceConfig.PARTITIONS_CHANGE);
    return StartPoint.at(oldest);
  }
}
