package dev.sluice.benchmarks.sink;

import dev.sluice.benchmarks.Rounds;
import com.mongodb.client.MongoClient;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.benchmarks.Prewrite;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import com.mongodb.client.MongoCursor;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.bson.RawBsonDocument;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;

/**
 * Changes per second relayed from a MongoDB change stream to Kafka, end to end: the clock stops
 * when the listener has committed a checkpoint covering every change, which it only does after
 * Kafka acknowledged all of them ({@code acks=all}). Variants, each on a fresh embedded MongoDB
 * with the same pre-written changes and a fresh topic on one embedded Kafka broker:
 *
 * <ol>
 *   <li>drain: the bare driver reads the change stream, no processing (the baseline);
 *   <li>relay, default batching (checkpoint every 100 changes or 1 s), each checkpoint waiting for
 *       its flush ({@code flushesInFlight 0}: the relay before ADR 0073);
 *   <li>relay, the default policy: the same batching, up to 4 flushes in flight (pipelined);
 *   <li>relay, pipelined, checkpoint every 1,000 changes;
 *   <li>the listener with a handler that does nothing (default checkpoints): what the feed, the
 *       lease and the checkpoints cost without a sink;
 *   <li>the bare driver reading the change stream and a bare Kafka producer sending each change's
 *       BSON bytes as they are (the sink's producer settings, no envelope, no checkpoint): what
 *       reaching Kafka costs at the least.
 * </ol>
 *
 * <p>The last two are not relays (neither commits a position that only acknowledged changes pass):
 * they split the gap between the drain and the relay into the listener's share and the sink's.
 *
 * <p>Every round runs every variant in the same order; the first {@code warmup} rounds are not
 * counted; each variant's figure is the median of its in-round ratios to the drain, with their
 * spread. Arguments: changes (default 100,000), warm-up rounds (default 1), measured rounds
 * (default 3). Or {@code profile <variant index> <changes> <runs>}: only that variant, for a
 * profiler attached to the JVM. Results: {@code docs/benchmarks.md}.
 */
public final class KafkaRelayBenchmark {
  private KafkaRelayBenchmark() {}

  private static final String[] NAMES = {
    "drain change stream, no processing",
    "relay, 100 / 1 s, each flush awaited",
    "relay, 100 / 1 s, 4 flushes in flight (default)",
    "relay, 1000 / 1 s, 4 flushes in flight",
    "listener, handler does nothing (default checkpoints)",
    "drain + bare producer, BSON bytes as they are"
  };

  private static final CheckpointPolicy[] POLICIES = {
    null,
    CheckpointPolicy.defaults().withFlushesInFlight(0),
    CheckpointPolicy.defaults(),
    CheckpointPolicy.every(1000, Duration.ofSeconds(1)),
    CheckpointPolicy.defaults(),
    null
  };

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("profile")) {
      profile(Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]));
      return;
    }
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 100_000;
    int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    Rounds result;
    try (EmbeddedKafka kafka = EmbeddedKafka.start()) {
      result = Rounds.run(NAMES, warmup, rounds, (r, v) -> run(kafka, v, changes, "r" + r));
    }
    System.out.printf("%nchanges=%d, %d warm-up + %d measured rounds; median of in-round ratios to the drain [min-max]%n",
        changes, warmup, rounds);
    result.printRatiosToBaseline();
    result.printRatio("pipelined / awaited (default batching)", 2, 1);
    result.printRatio("default relay / listener without a sink", 2, 4);
    result.printRatio("default relay / drain + bare producer", 2, 5);
  }

  private static double run(EmbeddedKafka kafka, int variant, int changes, String tag) throws Exception {
    String topic = "relay-" + variant + "-" + tag;
    return switch (variant) {
      case 0 -> Prewrite.drainRate("orders", changes);
      case 5 -> drainAndProduce(kafka, topic, changes);
      default -> relay(kafka, topic, changes, POLICIES[variant], variant != 4);
    };
  }

  private static void profile(int variant, int changes, int runs) throws Exception {
    try (EmbeddedKafka kafka = EmbeddedKafka.start()) {
      for (int r = 1; r <= runs; r++) {
        System.out.printf("%s: %.0f/s%n", NAMES[variant], run(kafka, variant, changes, "p" + r));
      }
    }
  }

  private static void prewrite(MongoClient client, int changes) {
    Prewrite.inserts(client.getDatabase("bench").getCollection("orders"), changes);
  }

  /**
   * The drain, each change's raw BSON sent by a bare producer with the sink's settings ({@code
   * acks=all}, idempotence, one request in flight, no linger); the clock stops when every send is
   * acknowledged.
   */
  private static double drainAndProduce(EmbeddedKafka kafka, String topic, int changes) {
    kafka.createTopic(topic, 3);
    Properties config = new Properties();
    config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    config.put(ProducerConfig.ACKS_CONFIG, "all");
    config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    config.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1);
    config.put(ProducerConfig.LINGER_MS_CONFIG, 0);
    config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
      prewrite(client, changes);
      producer.partitionsFor(topic); // metadata before the clock starts, as the relay's sink has it
      long start = System.nanoTime();
      int seen = 0;
      try (MongoCursor<RawBsonDocument> cursor = client.getDatabase("bench").getCollection("orders")
          .watch(List.of(), RawBsonDocument.class).fullDocument(FullDocument.UPDATE_LOOKUP)
          .startAtOperationTime(new BsonTimestamp(0, 0)).batchSize(500)
          .withDocumentClass(RawBsonDocument.class).cursor()) {
        while (seen < changes) {
          RawBsonDocument change = cursor.tryNext();
          if (change != null) {
            ByteBuffer bytes = change.getByteBuffer().asNIO();
            byte[] value = new byte[bytes.remaining()];
            bytes.get(value);
            producer.send(new ProducerRecord<>(topic, Integer.toString(seen++).getBytes(StandardCharsets.UTF_8), value));
          }
        }
      }
      producer.flush();
      return changes / ((System.nanoTime() - start) / 1e9);
    }
  }

  private static double relay(EmbeddedKafka kafka, String topic, int changes, CheckpointPolicy policy, boolean sinks)
      throws InterruptedException {
    kafka.createTopic(topic, 3);
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      prewrite(client, changes);
      CommitCounter committed = new CommitCounter(changes);
      try (KafkaSink<BsonDocument> sink = KafkaSink.builder(kafka.bootstrapServers(), topic,
                  MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
              .build()) {
        long start = System.nanoTime();
        try (Listener<BsonDocument> l = Listener.builder(
                MongoChangeFeed.builder(client, "bench", "orders").build(),
                MongoLeaseStore.builder(client.getDatabase("bench")).build()).group("relay")
            .checkpoint(policy)
            .handler(sinks ? sink : (change, fence) -> { })
            .observer(committed)
            .build().start()) {
          committed.awaitAll();
          return changes / ((System.nanoTime() - start) / 1e9);
        }
      }
    }
  }
}
