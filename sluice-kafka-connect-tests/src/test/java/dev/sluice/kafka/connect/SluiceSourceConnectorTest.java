package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
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
 * The connector without a cluster: validate() against the embedded MongoDB and PostgreSQL reports
 * each bad key by name; task configurations spread the partitions of one stream over the tasks.
 */
class SluiceSourceConnectorTest {
  private static InMemoryMongo mongo;
  private static String db;

  @BeforeAll
  static void servers() {
    mongo = SharedServers.mongo();
    db = mongo.freshDatabase().getName();
    mongo.client().getDatabase(db).createCollection("orders");
    mongo.client().getDatabase(db).createCollection("users");
  }

  private static Map<String, String> good() {
    Map<String, String> c = new HashMap<>();
    c.put("name", "cfg");
    c.put("connector.class", SluiceSourceConnector.class.getName());
    c.put("mongodb.connection.string", mongo.uri());
    c.put("mongodb.database", db);
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

    c = good();
    c.put("mongodb.missing.image", "park"); // parks as an undecodable change, which undecodable.policy=fail refuses
    assertThat(errors(c)).containsOnlyKeys("mongodb.missing.image");
    assertThat(errors(c).get("mongodb.missing.image").get(0)).contains("undecodable.policy=park");
    c.put("undecodable.policy", "park");
    assertThat(errors(c)).isEmpty();
  }

  /** A PostgreSQL database with table public.orders in publication pub_orders, and public.loose (no key). */
  private static Map<String, String> goodPostgres() {
    EmbeddedPostgresServer pg = SharedServers.postgres();
    String db = pg.createDatabase("cfg_pg");
    try (java.sql.Connection c = pg.dataSource(db).getConnection(); java.sql.Statement st = c.createStatement()) {
      st.execute("CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, seq int)");
      st.execute("CREATE TABLE IF NOT EXISTS loose (id text, seq int)");
      st.execute("DROP PUBLICATION IF EXISTS pub_orders");
      st.execute("CREATE PUBLICATION pub_orders FOR TABLE orders, loose");
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
    Map<String, String> c = new HashMap<>();
    c.put("name", "cfgpg");
    c.put("connector.class", SluiceSourceConnector.class.getName());
    c.put("source.type", "postgresql");
    c.put("postgres.url", pg.jdbcUrl(db));
    c.put("postgres.publication", "pub_orders");
    c.put("postgres.tables", "public.orders");
    c.put("partitions", "2");
    return c;
  }

  @Test
  void aGoodPostgresConfigurationHasNoErrors() {
    assertThat(errors(goodPostgres())).isEmpty();
    SluiceSourceConnector connector = new SluiceSourceConnector();
    connector.start(goodPostgres());
    assertThat(connector.taskConfigs(4)).hasSize(2)
        .allSatisfy(t -> assertThat(Unit.decode(t.get("sluice.task.units"))).extracting(Unit::stream)
            .containsExactly("public.orders"));
  }

  /**
   * A connector and a listener group of the same name on the same table: a slot has one reader and
   * one confirmed position, so they must not share one. The connector's slots have a prefix of
   * their own.
   */
  @Test
  void aConnectorNamedLikeAListenerGroupReadsThroughSlotsOfItsOwn() {
    Map<String, String> c = goodPostgres();
    SluiceSourceConfig config = new SluiceSourceConfig(c);
    try (var source = dev.sluice.kafka.connect.source.ConnectSource.open(config)) {
      dev.sluice.feed.PartitionSpec first = new dev.sluice.feed.PartitionSpec(0, 2);
      String connectorSlot = ((dev.sluice.postgres.feed.PostgresChangeFeed) source.feed("public.orders")
          .forGroup(config.connectorName())).slotName(first);
      String listenerSlot = dev.sluice.postgres.feed.PostgresChangeFeed.builder(c.get("postgres.url"), null, null,
          "pub_orders").table("public.orders").build().forGroup(config.connectorName()).slotName(first);
      assertThat(connectorSlot).isEqualTo("sluicekc_cfg_pg_cfgpg_public_orders_0of2").isNotEqualTo(listenerSlot);
      assertThat(listenerSlot).isEqualTo("sluice_cfg_pg_cfgpg_public_orders_0of2");
    }
  }

  @Test
  void eachBadPostgresKeyIsReportedUnderItsName() {
    Map<String, String> c = goodPostgres();
    c.put("postgres.tables", "public.orders,public.nosuch");
    assertThat(errors(c)).containsOnlyKeys("postgres.tables");
    assertThat(errors(c).get("postgres.tables").get(0)).contains("does not publish public.nosuch");

    c = goodPostgres();
    c.put("postgres.tables", "public.loose");
    assertThat(errors(c)).containsOnlyKeys("postgres.tables");
    assertThat(errors(c).get("postgres.tables").get(0)).contains("no primary key");

    c = goodPostgres();
    c.put("postgres.tables", "orders");
    assertThat(errors(c)).containsOnlyKeys("postgres.tables");
    assertThat(errors(c).get("postgres.tables").get(0)).contains("schema.table");

    c = goodPostgres();
    c.put("postgres.publication", "pub_nosuch");
    assertThat(errors(c)).containsOnlyKeys("postgres.publication");
    assertThat(errors(c).get("postgres.publication").get(0)).contains("CREATE PUBLICATION pub_nosuch");

    c = goodPostgres();
    c.put("postgres.url", "jdbc:mysql://db/shop?password=secret");
    assertThat(errors(c)).containsOnlyKeys("postgres.url");
    assertThat(errors(c).get("postgres.url").get(0)).contains("not a PostgreSQL JDBC URL").doesNotContain("secret");

    c = goodPostgres();
    c.put("postgres.url", "jdbc:postgresql://localhost:1/cfg_pg?connectTimeout=2");
    assertThat(errors(c)).containsOnlyKeys("postgres.url");

    c = goodPostgres();
    c.remove("postgres.tables");
    assertThat(errors(c)).containsOnlyKeys("postgres.tables");
    assertThat(errors(c).get("postgres.tables").get(0)).contains("required with source.type=postgresql");

    c = goodPostgres();
    c.put("mongodb.collections", "orders");
    assertThat(errors(c)).containsOnlyKeys("mongodb.collections");
    assertThat(errors(c).get("mongodb.collections").get(0)).contains("belongs to the other source");

    c = goodPostgres();
    c.put("partitions.change", "restart-from-oldest-offset");
    assertThat(errors(c)).containsOnlyKeys("partitions.change");

    // More slots than the server has (the test server allows 32).
    c = goodPostgres();
    c.put("partitions", "40");
    assertThat(errors(c)).containsOnlyKeys("partitions");
    assertThat(errors(c).get("partitions")).anySatisfy(e -> assertThat(e).contains("max_replication_slots=32"));

    assertThatThrownBy(() -> new SluiceSourceConfig(Map.of("source.type", "postgresql",
        "postgres.url", "jdbc:postgresql://db/shop", "postgres.tables", "public.orders")))
        .isInstanceOf(org.apache.kafka.common.config.ConfigException.class)
        .hasMessageContaining("postgres.publication is required with source.type=postgresql");
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
      assertThat(units).extracting(Unit::stream).containsExactly("orders", "users");
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
