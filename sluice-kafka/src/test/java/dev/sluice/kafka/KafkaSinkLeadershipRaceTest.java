package dev.sluice.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A fresh producer publishing to partitions whose leadership the broker is still applying (a new
 * topic here; a broker that just came back, or a moved leader, in production). The broker refuses
 * the first batch of such a partition with NOT_LEADER_OR_FOLLOWER; had a second batch been in
 * flight and arrived once the partition was served, the broker would append it (no producer state
 * yet) and the idempotent producer would retry the first one forever on
 * OUT_OF_ORDER_SEQUENCE_NUMBER (KAFKA-14359): the flush times out and the later records are in
 * the log before the earlier ones. The sink keeps one request in flight per broker, so that
 * cannot happen. Deliberately not {@link EmbeddedKafka#createTopic}, which waits until the
 * partitions are served.
 */
class KafkaSinkLeadershipRaceTest {
  private static final int ROUNDS = 20;
  private static final int PARTITIONS = 3;
  private static final int KEYS = 8;
  private static final int VERSIONS = 10;
  private static EmbeddedKafka kafka;

  @BeforeAll
  static void start() {
    kafka = EmbeddedKafka.start();
  }

  @AfterAll
  static void stop() {
    kafka.close();
  }

  @Test
  void publishingRightAfterTheTopicIsCreatedLosesNothingAndKeepsOrderPerKey() throws Exception {
    Fence fence = new Fence("orders#0", "owner-1", 1);
    for (int round = 0; round < ROUNDS; round++) {
      String topic = "unserved-" + round;
      try (Admin admin = kafka.admin()) {
        admin.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1))).all().get();
      }
      try (KafkaSink<BsonDocument> sink =
          KafkaSink.builder(kafka.bootstrapServers(), topic, MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
              .flushTimeout(Duration.ofSeconds(10))
              .build()) {
        int n = 0;
        for (int v = 1; v <= VERSIONS; v++) {
          for (int k = 0; k < KEYS; k++) {
            n++;
            String key = "key-" + k;
            BsonDocument id = new BsonDocument("_id", new BsonString(key));
            sink.handle(new ChangeEvent<>(topic + ":" + key + ":" + v, "orders", Position.of("tok-" + n),
                Operation.UPDATE, key, id, id.clone().append("version", new BsonInt32(v)), null, null), fence);
          }
        }
        sink.flush(fence); // throws if any record was not acknowledged within 10 s
      }
      List<ConsumerRecord<byte[], byte[]>> got = kafka.readAll(topic, KEYS * VERSIONS, Duration.ofSeconds(20));
      assertThat(got).as("round %d", round).hasSize(KEYS * VERSIONS);
      Map<String, List<Integer>> perKey = new HashMap<>();
      for (ConsumerRecord<byte[], byte[]> r : got) {
        Envelope e = Envelope.parse(r.value());
        perKey.computeIfAbsent(e.key(), x -> new ArrayList<>()).add(e.document().get("version").asInt());
      }
      List<Integer> expected = new ArrayList<>();
      for (int v = 1; v <= VERSIONS; v++) {
        expected.add(v);
      }
      assertThat(perKey).as("round %d", round).hasSize(KEYS);
      for (Map.Entry<String, List<Integer>> e : perKey.entrySet()) {
        assertThat(e.getValue()).as("round %d, %s", round, e.getKey()).containsExactlyElementsOf(expected);
      }
    }
  }
}
