package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.ExactlyOnceSupport;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The connector without a cluster: validate() against the embedded MongoDB reports each bad key
 * by name; task configurations spread the partitions of one collection over the tasks.
 */
class SluiceSourceConnectorTest {
  private static EmbeddedMongo mongo;

  @BeforeAll
  static void servers() {
    mongo = SharedServers.mongo();
    try (var client = mongo.client()) {
      client.getDatabase("cfg").createCollection("orders");
      client.getDatabase("cfg").createCollection("users");
    }
  }

  private static Map<String, String> good() {
    Map<String, String> c = new HashMap<>();
    c.put("name", "cfg");
    c.put("connector.class", SluiceSourceConnector.class.getName());
    c.put("mongodb.connection.string", mongo.connectionString());
    c.put("mongodb.database", "cfg");
    c.put("mongodb.collections", "orders,users");
    c.put("partitions", "4");
    return c;
  }

  private static Map<String, List<String>> errors(Map<String, String> config) {
    Config result = new SluiceSourceConnector().validate(config);
    Map<String, List<String>> out = new HashMap<>();
    for (ConfigValue v : result.configValues()) {
      if (!v.errorMessages().isEmpty()) {
        out.put(v.name(), v.errorMessages());
      }
    }
    return out;
  }

  @Test
  void aGoodConfigurationHasNoErrors() {
    assertThat(errors(good())).isEmpty();
  }

  @Test
  void eachBadKeyIsReportedUnderItsName() {
    Map<String, String> c = good();
    c.put("mongodb.collections", "orders,ordres");
    assertThat(errors(c)).containsOnlyKeys("mongodb.collections");
    assertThat(errors(c).get("mongodb.collections").get(0)).contains("no collection [ordres]");

    c = good();
    c.put("mongodb.connection.string", "postgres://nope");
    assertThat(errors(c)).containsOnlyKeys("mongodb.connection.string");
    assertThat(errors(c).get("mongodb.connection.string").get(0))
        .contains("not a valid MongoDB connection string").doesNotContain("postgres://nope");

    c = good();
    c.put("partitions", "5000");
    assertThat(errors(c)).containsOnlyKeys("partitions");
    c.put("partitions", "0");
    assertThat(errors(c)).containsOnlyKeys("partitions");

    c = good();
    c.put("value.format", "avro");
    assertThat(errors(c)).containsOnlyKeys("value.format");
    assertThat(errors(c).get("value.format").get(0)).contains("avro");

    c = good();
    c.put("history.lost.policy", "ignore");
    c.put("startup.mode", "yesterday");
    assertThat(errors(c)).containsOnlyKeys("history.lost.policy", "startup.mode");

    c = good();
    c.remove("mongodb.database");
    assertThat(errors(c)).containsKey("mongodb.database");
  }

  @Test
  void recommendersOfferTheAllowedValues() {
    Config result = new SluiceSourceConnector().validate(good());
    ConfigValue policy = result.configValues().stream().filter(v -> v.name().equals("history.lost.policy"))
        .findFirst().orElseThrow();
    assertThat(policy.recommendedValues()).containsExactly("fail", "skip", "resnapshot");
  }

  @Test
  void thePartitionsOfOneCollectionAreSpreadOverTheTasks() {
    SluiceSourceConnector connector = new SluiceSourceConnector();
    connector.start(good());
    List<Map<String, String>> tasks = connector.taskConfigs(4);
    assertThat(tasks).hasSize(4);
    for (Map<String, String> t : tasks) {
      List<Unit> units = Unit.decode(t.get("sluice.task.units"));
      assertThat(units).hasSize(2); // 2 collections x 4 partitions over 4 tasks
      assertThat(units).extracting(Unit::collection).containsExactly("orders", "users");
    }
    assertThat(connector.taskConfigs(100)).hasSize(8); // never more tasks than partitions
    assertThat(connector.exactlyOnceSupport(good())).isEqualTo(ExactlyOnceSupport.SUPPORTED);
  }

  @Test
  void malformedOffsetsAreRefusedByTheOffsetsApi() {
    SluiceSourceConnector connector = new SluiceSourceConnector();
    Map<Map<String, ?>, Map<String, ?>> bad = new HashMap<>();
    bad.put(Map.of("stream", "cfg.orders"), Map.of("position", "x"));
    assertThatThrownBy(() -> connector.alterOffsets(good(), bad)).isInstanceOf(ConnectException.class)
        .hasMessageContaining("\"partitions\": int");
    Map<Map<String, ?>, Map<String, ?>> ok = new HashMap<>();
    ok.put(Map.of("stream", "cfg.orders", "partition", 0, "partitions", 4), Map.of("position", "x"));
    assertThat(connector.alterOffsets(good(), ok)).isTrue();
  }
}
