package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ListenerOnPostgresTest.simple;
import static dev.sluice.postgres.listener.ListenerOnPostgresTest.sql;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.deadletter.DeadLetters;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.jdbc.deadletter.JdbcDeadLetterStore;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.Publication;
import dev.sluice.sink.Replay;
import dev.sluice.testkit.kafka.EmbeddedKafka;
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
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Issue 13 item 5: the Kafka sink, the SQL dead-letter store and dead-letter replay on the
 * PostgreSQL feed, as on MongoDB: rows (existing ones by snapshot, then changes) relayed in feed
 * order per key with exact numerics; a row whose domain event is malformed is parked in the SQL
 * store with the later changes of its key behind it, the other keys flow, and after the operator
 * discards it the rest of the key is replayed to the topic.
 */
class RelayFromPostgresTest {
  private static EmbeddedKafka kafka;
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final java.util.concurrent.atomic.AtomicInteger DATABASES = new java.util.concurrent.atomic.AtomicInteger();
  private final String db = PG.createDatabase("relay" + DATABASES.incrementAndGet());
  private final String url = PG.jdbcUrl(db);
  private final DataSource ds = simple(url);
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeAll
  static void startKafka() {
    kafka = EmbeddedKafka.start();
  }

  @AfterAll
  static void stopKafka() {
    if (kafka != null) {
      kafka.close();
    }
  }

  @AfterEach
  void stop() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    PG.dropReplicationSlots(db);
  }

  private KafkaSink<Map<String, Object>> sink(String topic, MessageEncoder<Map<String, Object>> encoder) {
    KafkaSink<Map<String, Object>> sink = KafkaSink.builder(kafka.bootstrapServers(), topic, encoder)
        .flushTimeout(Duration.ofSeconds(5)).build();
    toClose.add(sink);
    return sink;
  }

  /** Starts the relay and waits until each partition has its slot (and snapshot): later writes are streamed. */
  private void listener(KafkaSink<Map<String, Object>> sink, FailurePolicy failure) {
    Listener<Map<String, Object>> l = Listener.builder(
            PostgresChangeFeed.builder(url, EmbeddedPostgresServer.USER, null, "pub").table("public.orders").build(),
            SqlLeaseStore.builder(ds).build())
        .group("relay")
        .partitions(2)
        .leaseDuration(Duration.ofSeconds(3))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(BootstrapPolicy.snapshot())
        .checkpoint(CheckpointPolicy.every(50, Duration.ofMillis(200)))
        .handler(sink)
        .onFailure(failure)
        .build()
        .start();
    toClose.add(l);
    await().atMost(Duration.ofSeconds(30)).until(() -> l.status().stream().allMatch(p -> p.committed() != null));
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    return new String(r.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
  }

  @Test
  void rowsAndTheirChangesReachKafkaInOrderPerKeyWithExactNumbers() throws Exception {
    sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, amount numeric(30,10), v int)",
        "CREATE PUBLICATION pub FOR TABLE orders",
        "INSERT INTO orders SELECT g, 12345678901234567890.0123456789 + g, 0 FROM generate_series(1, 100) g");
    String topic = "pg-orders";
    kafka.createTopic(topic, 3);
    listener(sink(topic, MessageEncoder.builder(PostgresDocuments.mapper()).build()), FailurePolicy.block(RetryPolicy.defaults()));
    for (int v = 1; v <= 3; v++) {
      sql(ds, "UPDATE orders SET v = " + v + " WHERE id % 10 = 0");
    }
    sql(ds, "DELETE FROM orders WHERE id = 50");
    int total = 100 + 3 * 10 + 1;
    List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll(topic, total, Duration.ofSeconds(60));
    Map<String, List<String>> perKey = new LinkedHashMap<>();
    Set<String> ids = new HashSet<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      Envelope e = Envelope.parse(r.value());
      if (ids.add(e.id())) {
        perKey.computeIfAbsent(e.key(), k -> new ArrayList<>())
            .add(e.operation() + (e.document() == null ? "" : ":" + e.document().get("v").asInt()));
      }
    }
    assertThat(perKey).as("every key").hasSize(100);
    assertThat(ids).hasSize(total);
    assertThat(perKey.get("public.orders[\"10\"]")).containsExactly("SNAPSHOT:0", "UPDATE:1", "UPDATE:2", "UPDATE:3");
    assertThat(perKey.get("public.orders[\"50\"]")).containsExactly("SNAPSHOT:0", "UPDATE:1", "UPDATE:2", "UPDATE:3", "DELETE");
    assertThat(perKey.get("public.orders[\"7\"]")).containsExactly("SNAPSHOT:0");
    String body = records.stream().filter(r -> new String(r.key(), StandardCharsets.UTF_8).equals("public.orders[\"7\"]"))
        .map(r -> new String(r.value(), StandardCharsets.UTF_8)).findFirst().orElseThrow();
    assertThat(body).as("numeric(30,10) with every digit").contains("\"amount\":12345678901234567897.0123456789");

    // The consumer side: an inbox applies each message once, however often it is delivered.
    sql(ds, "CREATE TABLE order_copy (id int PRIMARY KEY, v int)");
    dev.sluice.jdbc.inbox.JdbcInbox inbox = dev.sluice.jdbc.inbox.JdbcInbox.builder(ds).consumerGroup("copier").build();
    inbox.createTable();
    int applied = 0;
    for (int pass = 0; pass < 2; pass++) { // the second pass is a full redelivery
      for (ConsumerRecord<byte[], byte[]> r : records) {
        Envelope e = Envelope.parse(r.value());
        boolean ran = inbox.processIfNew(e.id(), c -> {
          try (java.sql.PreparedStatement st = c.prepareStatement(e.document() == null
              ? "DELETE FROM order_copy WHERE id = ?"
              : "INSERT INTO order_copy VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET v = excluded.v")) {
            st.setInt(1, e.documentKey().get("id").asInt());
            if (e.document() != null) {
              st.setInt(2, e.document().get("v").asInt());
            }
            st.executeUpdate();
          }
        });
        applied += ran ? 1 : 0;
      }
    }
    assertThat(applied).as("each message applied once over two deliveries").isEqualTo(total);
    try (java.sql.Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SELECT (SELECT count(*) FROM order_copy),"
            + " (SELECT count(*) FROM orders o JOIN order_copy k ON k.id = o.id AND k.v = o.v)")) {
      rs.next();
      assertThat(rs.getInt(1)).isEqualTo(99);
      assertThat(rs.getInt(2)).as("the copy equals the source table").isEqualTo(99);
    }
  }

  /**
   * Issue 33 defect 4 through the relay: a primary-key update reaches the topic as a delete record
   * under the old key (in the old key's Kafka partition, after that key's earlier records) and an
   * insert under the new key, so the latest record of every old key says it is gone: what a
   * compacted topic or a consumer upserting by key keeps is exactly the table.
   */
  @Test
  void aPrimaryKeyUpdateReachesKafkaAsTheOldKeysDeleteAndTheNewKeysInsert() throws Exception {
    sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, amount numeric(30,10), v int)",
        "CREATE PUBLICATION pub FOR TABLE orders",
        "INSERT INTO orders SELECT g, g, 0 FROM generate_series(1, 10) g");
    String topic = "pg-moves";
    kafka.createTopic(topic, 3);
    listener(sink(topic, MessageEncoder.builder(PostgresDocuments.mapper()).build()), FailurePolicy.block(RetryPolicy.defaults()));
    sql(ds, "UPDATE orders SET id = id + 100, v = 1 WHERE id <= 5");
    int total = 10 + 5 * 2;
    List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll(topic, total, Duration.ofSeconds(60));
    Map<String, List<String>> perKey = new LinkedHashMap<>();
    Map<String, Integer> partitionOf = new LinkedHashMap<>();
    Set<String> ids = new HashSet<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      Envelope e = Envelope.parse(r.value());
      assertThat(new String(r.key(), StandardCharsets.UTF_8)).isEqualTo(e.key());
      assertThat(partitionOf.computeIfAbsent(e.key(), k -> r.partition())).as("one Kafka partition per key")
          .isEqualTo(r.partition());
      if (ids.add(e.id())) {
        perKey.computeIfAbsent(e.key(), k -> new ArrayList<>())
            .add(e.operation() + (e.document() == null ? "" : ":" + e.document().get("v").asInt()));
      }
    }
    assertThat(ids).hasSize(total);
    assertThat(perKey.get("public.orders[\"3\"]")).containsExactly("SNAPSHOT:0", "DELETE");
    assertThat(perKey.get("public.orders[\"103\"]")).containsExactly("INSERT:1");
    assertThat(perKey.get("public.orders[\"7\"]")).containsExactly("SNAPSHOT:0");
    Set<String> live = new HashSet<>();
    perKey.forEach((key, ops) -> {
      if (!ops.get(ops.size() - 1).equals("DELETE")) {
        live.add(key);
      }
    });
    Set<String> table = new HashSet<>();
    for (int id : new int[] {6, 7, 8, 9, 10, 101, 102, 103, 104, 105}) {
      table.add("public.orders[\"" + id + "\"]");
    }
    assertThat(live).as("the keys whose latest record is not a delete are the table's").isEqualTo(table);
  }

  @Test
  void aMalformedDomainEventIsParkedInTheSqlStoreAndItsKeyReplayedAfterTheOperatorDiscardsIt() throws Exception {
    sql(ds, "CREATE TABLE orders (id text PRIMARY KEY, last_event jsonb)", "CREATE PUBLICATION pub FOR TABLE orders");
    JdbcDeadLetterStore<Map<String, Object>> dlq =
        JdbcDeadLetterStore.builder(ds, PostgresDocuments::encode, PostgresDocuments::decode).build();
    dlq.createTable();
    String topic = "pg-events";
    kafka.createTopic(topic, 1);
    MessageEncoder<Map<String, Object>> events = MessageEncoder.builder(PostgresDocuments.mapper())
        .publication(Publication.domainEvents("last_event", "id")).build();
    listener(sink(topic, events), FailurePolicy.park(RetryPolicy.attempts(2, Duration.ofMillis(10), Duration.ofMillis(20)), dlq));
    String stream = "relay/public.orders";

    sql(ds, "INSERT INTO orders VALUES ('a', '{\"id\": \"a-1\"}')",
        "INSERT INTO orders VALUES ('p', '{\"type\": \"NoIdHere\"}')");
    await().atMost(Duration.ofSeconds(30)).until(() -> dlq.count(stream) == 1);
    sql(ds, "UPDATE orders SET last_event = '{\"id\": \"p-2\", \"amount\": 0.1000000000000000055511151231257827}'"
            + " WHERE id = 'p'",
        "INSERT INTO orders VALUES ('b', '{\"id\": \"b-1\"}')",
        "UPDATE orders SET last_event = '{\"id\": \"a-2\"}' WHERE id = 'a'");
    await().atMost(Duration.ofSeconds(30)).until(() -> dlq.count(stream) == 2
        && kafka.readAll(topic, 3, Duration.ofSeconds(1)).stream().map(r -> header(r, Envelope.HEADER_ID))
            .distinct().count() == 3);
    assertThat(kafka.readAll(topic, 3, Duration.ofSeconds(5))).extracting(r -> header(r, Envelope.HEADER_ID))
        .containsExactlyInAnyOrder("a-1", "b-1", "a-2");
    List<ParkedChange<Map<String, Object>>> parked = dlq.listKey(stream, "public.orders[\"p\"]");
    assertThat(parked).hasSize(2);
    assertThat(parked.get(0).error()).contains("no id field 'id'");
    assertThat(parked.get(1).error()).contains("parked behind");
    assertThat(parked.get(1).event().document().get("last_event").toString())
        .as("the parked row read back from the SQL store as it was").contains("0.1000000000000000055511151231257827");

    DeadLetters<Map<String, Object>> ops = DeadLetters.of(dlq);
    assertThat(ops.discard(stream, parked.get(0).event().id())).isTrue();
    DeadLetters.ReplayResult result = ops.replayKey(stream, "public.orders[\"p\"]", sink(topic, events), Replay.fence("public.orders"));
    assertThat(result.complete()).isTrue();
    assertThat(result.replayed()).isEqualTo(1);
    assertThat(dlq.count(stream)).isZero();
    List<ConsumerRecord<byte[], byte[]>> all = kafka.readAll(topic, 4, Duration.ofSeconds(10));
    assertThat(all).extracting(r -> header(r, Envelope.HEADER_ID)).contains("p-2");
    assertThat(all.stream().map(r -> new String(r.value(), StandardCharsets.UTF_8)).filter(b -> b.contains("p-2")))
        .singleElement().asString().contains("0.1000000000000000055511151231257827");
  }
}
