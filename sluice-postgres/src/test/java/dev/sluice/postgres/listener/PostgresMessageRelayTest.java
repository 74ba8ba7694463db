package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ListenerOnPostgresTest.simple;
import static dev.sluice.postgres.listener.ListenerOnPostgresTest.sql;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.sink.Envelope;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 33 item 3 (ADR 0096): logical-decoding messages as the outbox, through the listener and
 * the Kafka relay. Each transaction inserts a row and writes six messages of prefix {@code
 * outbox:<k>} and one of prefix {@code audit} (not asked for). The relay JVM is killed (SIGKILL)
 * after it sent changes no checkpoint covered, while transactions are still being written; a
 * second relay takes over. Every row and every outbox message is in Kafka (key: the prefix,
 * operation MESSAGE, the content as written), none of prefix audit, each key's messages in the
 * order written, and the duplicates are at most what no checkpoint covered.
 */
class PostgresMessageRelayTest {
  private static final int CHECKPOINT_EVERY = 50;
  private static final ObjectMapper JSON = new ObjectMapper();
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @AfterEach
  void cleanUp() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
  }

  private <T extends AutoCloseable> T closeLater(T c) {
    toClose.add(c);
    return c;
  }

  /** Transactions {@code from} to {@code to} (exclusive): a row and seven messages each. */
  private static void write(DataSource ds, int from, int to) throws Exception {
    try (Connection c = ds.getConnection(); Statement s = c.createStatement()) {
      c.setAutoCommit(false);
      for (int tx = from; tx < to; tx++) {
        s.execute("INSERT INTO orders VALUES (" + tx + ", " + tx + ")");
        for (int j = 0; j < 6; j++) {
          s.execute("SELECT pg_logical_emit_message(true, 'outbox:" + ((tx + j) % 5) + "', '{\"tx\":" + tx
              + ",\"j\":" + j + "}')");
          if (j == 2) {
            s.execute("SELECT pg_logical_emit_message(true, 'audit', 'tx " + tx + "')");
          }
        }
        c.commit();
      }
    }
  }

  @Test
  void outboxMessagesReachKafkaOnceOrAsDuplicatesWithinTheBoundAcrossAKilledRelay() throws Exception {
    EmbeddedKafka kafka = closeLater(EmbeddedKafka.start());
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("pgoutboxrelay");
    toClose.add(() -> pg.dropReplicationSlots(db));
    String url = pg.jdbcUrl(db);
    DataSource ds = simple(url);
    sql(ds, "CREATE TABLE orders (id int PRIMARY KEY, n int)", "CREATE PUBLICATION pub FOR TABLE orders");
    kafka.createTopic("outbox", 3);
    String[] args = {url, kafka.bootstrapServers(), "outbox", Integer.toString(CHECKPOINT_EVERY)};

    ChildJvm first = closeLater(ChildJvm.start("outbox-relay-1", PgMessageRelayNode.class, args));
    first.awaitLineStartingWith("READY", Duration.ofSeconds(60));
    write(ds, 0, 60); // 60 rows and 360 outbox messages
    first.awaitLine(l -> l.equals("DELIVERED " + (CHECKPOINT_EVERY + CHECKPOINT_EVERY / 2)), Duration.ofSeconds(30));
    first.awaitLine(l -> l.startsWith("COMMITTED ") && !l.equals("COMMITTED 0"), Duration.ofSeconds(30));
    first.kill();
    first.awaitExit(Duration.ofSeconds(10));
    long committed = first.output().stream().filter(l -> l.startsWith("COMMITTED "))
        .mapToLong(l -> Long.parseLong(l.substring("COMMITTED ".length()))).sum();
    long delivered = first.output().stream().filter(l -> l.startsWith("DELIVERED ")).count();
    assertThat(delivered).as("sent before the kill, beyond the last checkpoint").isGreaterThan(committed);
    write(ds, 60, 100);

    ChildJvm second = closeLater(ChildJvm.start("outbox-relay-2", PgMessageRelayNode.class, args));
    second.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    int expected = 100 + 600;
    // Each read takes what the topic holds at that moment (up to its end offsets; the sink writes
    // without transactions) and returns as soon as it has it, instead of polling for a fixed time.
    await().atMost(Duration.ofSeconds(90))
        .until(() -> distinctIds(kafka.readToEnd("outbox", Duration.ofSeconds(30))).size() == expected);

    List<ConsumerRecord<byte[], byte[]>> all = kafka.readToEnd("outbox", Duration.ofSeconds(30));
    Set<String> ids = new HashSet<>();
    Map<String, List<String>> perKey = new LinkedHashMap<>();
    Set<Integer> rows = new HashSet<>();
    Map<String, Integer> last = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : all) {
      Envelope e = Envelope.parse(r.value());
      if (!ids.add(e.id())) {
        continue; // a duplicate from the replay
      }
      if (e.operation().equals("INSERT")) {
        rows.add(e.document().get("id").asInt());
        continue;
      }
      assertThat(e.operation()).isEqualTo("MESSAGE");
      assertThat(new String(r.key(), StandardCharsets.UTF_8)).as("record key: the prefix").isEqualTo(e.key());
      assertThat(e.key()).startsWith("outbox:");
      assertThat(e.document().get("prefix").asText()).isEqualTo(e.key());
      JsonNode content = JSON.readTree(e.document().get("content").asText());
      int order = content.get("tx").asInt() * 10 + content.get("j").asInt();
      assertThat(order).as("key " + e.key() + " in the order written").isGreaterThan(last.getOrDefault(e.key(), -1));
      last.put(e.key(), order);
      perKey.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(content.toString());
    }
    assertThat(rows).as("every row").hasSize(100);
    assertThat(perKey.keySet()).containsExactlyInAnyOrder("outbox:0", "outbox:1", "outbox:2", "outbox:3", "outbox:4");
    assertThat(perKey.values().stream().mapToInt(List::size).sum()).as("every outbox message").isEqualTo(600);
    assertThat(ids).hasSize(expected);
    long duplicates = all.size() - ids.size();
    assertThat(duplicates).as("published twice: at most what no checkpoint covered")
        .isLessThanOrEqualTo((CheckpointPolicy.DEFAULT_FLUSHES_IN_FLIGHT + 1L) * CHECKPOINT_EVERY);
    System.out.println("outbox crash test: " + delivered + " delivered and " + committed
        + " committed before SIGKILL, " + duplicates + " duplicates");
  }

  private static Set<String> distinctIds(List<ConsumerRecord<byte[], byte[]>> records) {
    Set<String> out = new HashSet<>();
    records.forEach(r -> out.add(Envelope.parse(r.value()).id()));
    return out;
  }
}
