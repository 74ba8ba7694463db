package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.ListenerSettings;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The connector's keys that are settings of a listener have the listener's defaults
 * (ListenerSettings, ADR 0116), and its history-lost words mean the listener's policies; its poll
 * batch is its own (ADR 0125).
 */
class SluiceSourceConfigTest {
  private static final Map<String, String> MINIMAL = Map.of(SluiceSourceConfig.MONGODB_URI, "mongodb://localhost:27017",
      SluiceSourceConfig.MONGODB_DATABASE, "shop", SluiceSourceConfig.COLLECTIONS, "orders");

  @Test
  void theListenersSettingsHaveTheListenersDefaults() {
    SluiceSourceConfig c = new SluiceSourceConfig(MINIMAL);
    assertThat(c.partitions()).isEqualTo(ListenerSettings.PARTITIONS.defaultValue()).isEqualTo(1);
    assertThat(c.startupMode()).isEqualTo(ListenerSettings.BOOTSTRAP.defaultValue()).isEqualTo("oldest");
    assertThat(c.historyLostPolicy()).isEqualTo("fail");
    assertThat(c.historyLost()).isEqualTo(ListenerSettings.historyLost(null, "onHistoryLost"));
    assertThat(c.heartbeatInterval()).isEqualTo(ListenerSettings.CHECKPOINT_HEARTBEAT.defaultValue())
        .isEqualTo(Duration.ofSeconds(10));
  }

  /**
   * ADR 0125: with exactly-once delivery Connect commits a transaction per poll, so a poll may hold
   * 4,096 changes of a partition by default, twice Debezium's 2,048 (with the feeds' 500 the
   * connector paid four times Debezium's commits on a backlog and fell to 0.89x its throughput).
   */
  @Test
  void aPollHoldsUpTo4096ChangesByDefaultMoreThanDebeziumsPollAndTheFeeds() {
    SluiceSourceConfig c = new SluiceSourceConfig(MINIMAL);
    assertThat(c.batchSize()).isEqualTo(SluiceSourceConfig.DEFAULT_BATCH_SIZE).isEqualTo(4096)
        .isGreaterThan(2048).isGreaterThan(dev.sluice.mongodb.feed.MongoChangeFeed.DEFAULT_BATCH_SIZE);
    Map<String, String> set = new java.util.HashMap<>(MINIMAL);
    set.put(SluiceSourceConfig.BATCH_SIZE, "500");
    assertThat(new SluiceSourceConfig(set).batchSize()).as("still settable").isEqualTo(500);
  }

  @Test
  void eachHistoryLostWordMeansAListenerPolicy() {
    Map<String, HistoryLostPolicy> expected = Map.of("fail", HistoryLostPolicy.STOP, "skip",
        HistoryLostPolicy.SKIP_TO_LATEST, "resnapshot", HistoryLostPolicy.RESNAPSHOT);
    assertThat(SluiceSourceConfig.HISTORY_LOST_POLICIES).containsExactlyInAnyOrderElementsOf(expected.keySet());
    expected.forEach((word, policy) -> {
      java.util.Map<String, String> props = new java.util.HashMap<>(MINIMAL);
      props.put(SluiceSourceConfig.HISTORY_LOST_POLICY, word.toUpperCase(java.util.Locale.ROOT));
      assertThat(new SluiceSourceConfig(props).historyLost()).as(word).isEqualTo(policy);
    });
  }
}
