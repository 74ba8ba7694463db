package dev.sluice.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoCollection;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.sink.Envelope;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A relay JVM killed with SIGKILL mid-stream: nothing lost, redelivery bounded by what no checkpoint
 * covered (the batch being handled and the flushes in flight).
 */
class KafkaRelayCrashTest {
  private static final int CHECKPOINT_EVERY = 50;
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

  @Test
  void aRelayKilledMidBatchLosesNothingAndRedeliversAtMostOneBatch() throws Exception {
    EmbeddedKafka kafka = closeLater(EmbeddedKafka.start());
    InMemoryMongo mongo = closeLater(new InMemoryMongo()); // or -Dsluice.mongodb.uri
    String shop = mongo.freshDatabase().getName();
    MongoCollection<BsonDocument> orders = mongo.client().getDatabase(shop).getCollection("orders", BsonDocument.class);
    kafka.createTopic("orders", 3);
    String[] args = {mongo.uri(), kafka.bootstrapServers(), "orders", Integer.toString(CHECKPOINT_EVERY), shop};

    ChildJvm first = closeLater(ChildJvm.start("relay-1", RelayNode.class, args));
    first.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    insert(orders, 0, 400);
    // Past the first checkpoint and into the next batches: 50+ committed, more sent but not
    // committed (the relay flushes every 50 and keeps up to 4 flushes in flight).
    first.awaitLine(l -> l.equals("DELIVERED " + (CHECKPOINT_EVERY + CHECKPOINT_EVERY / 2)), Duration.ofSeconds(30));
    first.awaitLine(l -> l.startsWith("COMMITTED ") && !l.equals("COMMITTED 0"), Duration.ofSeconds(30));
    first.kill(); // SIGKILL
    first.awaitExit(Duration.ofSeconds(10));
    // From the killed JVM's own output (complete once it exited): it had delivered (sent)
    // changes that no checkpoint covered, so the crash really was mid-batch.
    long committedBeforeKill = first.output().stream().filter(l -> l.startsWith("COMMITTED "))
        .mapToLong(l -> Long.parseLong(l.substring("COMMITTED ".length()))).sum();
    long deliveredBeforeKill = first.output().stream().filter(l -> l.startsWith("DELIVERED ")).count();
    assertThat(committedBeforeKill).as("committed before the kill").isGreaterThanOrEqualTo(CHECKPOINT_EVERY);
    assertThat(deliveredBeforeKill).as("delivered before the kill").isGreaterThan(committedBeforeKill);
    insert(orders, 400, 600);

    ChildJvm second = closeLater(ChildJvm.start("relay-2", RelayNode.class, args));
    second.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(30));
    // Each read takes what the topic holds at that moment (up to its end offsets; the sink writes
    // without transactions) and returns as soon as it has it, instead of polling for a fixed time.
    await().atMost(Duration.ofSeconds(60))
        .until(() -> distinct(kafka.readToEnd("orders", Duration.ofSeconds(30))).size() == 600);

    List<ConsumerRecord<byte[], byte[]>> all = kafka.readToEnd("orders", Duration.ofSeconds(30));
    Map<String, Long> perId = distinct(all);
    assertThat(perId).hasSize(600);
    long duplicates = all.size() - perId.size();
    // At most what no checkpoint covered: the batch being handled and the flushes in flight.
    assertThat(duplicates).as("redelivered after the crash")
        .isLessThanOrEqualTo((CheckpointPolicy.DEFAULT_FLUSHES_IN_FLIGHT + 1L) * CHECKPOINT_EVERY);
    System.out.println("crash test: " + deliveredBeforeKill + " delivered and " + committedBeforeKill
        + " committed before SIGKILL, " + duplicates + " duplicates");
  }

  private static void insert(MongoCollection<BsonDocument> orders, int from, int to) {
    for (int i = from; i < to; i++) {
      orders.insertOne(new BsonDocument("_id", new BsonInt32(i)).append("n", new BsonInt32(i)));
    }
  }

  private static Map<String, Long> distinct(List<ConsumerRecord<byte[], byte[]>> records) {
    return records.stream()
        .map(r -> new String(r.headers().lastHeader(Envelope.HEADER_CHANGE_ID).value(), StandardCharsets.UTF_8))
        .collect(Collectors.groupingBy(Function.identity(), Collectors.counting()));
  }
}
