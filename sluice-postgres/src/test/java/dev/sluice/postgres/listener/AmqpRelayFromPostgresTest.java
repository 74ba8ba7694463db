package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ListenerOnPostgresTest.simple;
import static dev.sluice.postgres.listener.ListenerOnPostgresTest.sql;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.sluice.amqp.AmqpSink;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * Issue 13 item 5: the AMQP sink on the PostgreSQL feed: existing rows (snapshot) and later changes
 * reach a queue through publisher confirms, in order per key, each once, with exact numbers.
 */
class AmqpRelayFromPostgresTest {

  @Test
  void rowsAndTheirChangesReachAnAmqpQueueInOrderPerKey() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("amqprelay");
    String url = pg.jdbcUrl(db);
    DataSource ds = simple(url);
    sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, amount numeric(30,10), v int)",
        "CREATE PUBLICATION pub FOR TABLE orders",
        "INSERT INTO orders SELECT g, 12345678901234567890.0123456789 + g, 0 FROM generate_series(1, 40) g");
    try (EmbeddedAmqpBroker broker = EmbeddedAmqpBroker.start();
        AmqpSink<Map<String, Object>> sink = AmqpSink.builder(broker.connectionFactory(), "orders",
            MessageEncoder.builder(PostgresDocuments.mapper()).build()).build();
        Listener<Map<String, Object>> listener = Listener.builder(
                PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build(),
                SqlLeaseStore.builder(ds).build())
            .group("amqp")
            .partitions(2)
            .leaseDuration(Duration.ofSeconds(3))
            .pollWait(Duration.ofMillis(50))
            .bootstrap(BootstrapPolicy.snapshot())
            .checkpoint(CheckpointPolicy.every(20, Duration.ofMillis(200)))
            .handler(sink)
            .build()) {
      broker.declareQueue("orders", "orders-q", "#");
      listener.start();
      await().atMost(Duration.ofSeconds(30)).until(() -> listener.status().stream().allMatch(p -> p.committed() != null));
      sql(ds, "UPDATE orders SET v = 1 WHERE id % 4 = 0", "UPDATE orders SET v = 2 WHERE id % 4 = 0",
          "DELETE FROM orders WHERE id = 8");
      int total = 40 + 10 + 10 + 1;
      Map<String, List<String>> perKey = new LinkedHashMap<>();
      Set<String> ids = new HashSet<>();
      List<String> bodies = new ArrayList<>();
      try (Connection c = broker.connectionFactory().newConnection(); Channel ch = c.createChannel()) {
        await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(50)).until(() -> {
          for (GetResponse r = ch.basicGet("orders-q", true); r != null; r = ch.basicGet("orders-q", true)) {
            Envelope e = Envelope.parse(r.getBody());
            if (ids.add(e.id())) {
              perKey.computeIfAbsent(e.key(), k -> new ArrayList<>())
                  .add(e.operation() + (e.document() == null ? "" : ":" + e.document().get("v").asInt()));
              bodies.add(new String(r.getBody(), StandardCharsets.UTF_8));
            }
          }
          return ids.size() >= total;
        });
      }
      assertThat(ids).hasSize(total);
      assertThat(perKey.get("public.orders[\"4\"]")).containsExactly("SNAPSHOT:0", "UPDATE:1", "UPDATE:2");
      assertThat(perKey.get("public.orders[\"8\"]")).containsExactly("SNAPSHOT:0", "UPDATE:1", "UPDATE:2", "DELETE");
      assertThat(perKey.get("public.orders[\"5\"]")).containsExactly("SNAPSHOT:0");
      assertThat(bodies).anyMatch(b -> b.contains("\"amount\":12345678901234567895.0123456789"));
    } finally {
      pg.dropReplicationSlots(db);
    }
  }
}
