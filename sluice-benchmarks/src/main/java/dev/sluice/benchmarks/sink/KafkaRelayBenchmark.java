package dev.sluice.benchmarks.sink;

import com.mongodb.client.MongoChangeStreamCursor;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.changestream.ChangeStreamDocument;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.Document;

/**
 * Changes per second relayed from a MongoDB change stream to Kafka, end to end: the clock stops
 * when the listener has committed a checkpoint covering every change, which it only does after
 * Kafka acknowledged all of them ({@code acks=all}). Variants, all in one run, each on a
 * fresh embedded MongoDB with the same pre-written changes and a fresh topic on one embedded
 * Kafka broker:
 *
 * <ol>
 *   <li>drain: the bare driver reads the change stream, no processing (upper bound here);
 *   <li>relay, checkpoint after every change (each change waits for its ack);
 *   <li>relay, default batching (checkpoint every 100 changes or 1 s);
 * </ol>
 *
 * <p>Each relay runs with the producer's {@code linger.ms} at 0 and at 5.
 *
 * <p>Arguments: changes (default 3000), rounds (default 3). Results: {@code docs/benchmarks.md}.
 */
public final class KafkaRelayBenchmark {
  private KafkaRelayBenchmark() {}

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 3000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
    String[] names = {
      "drain change stream, no processing",
      "relay, checkpoint every change, linger.ms=0",
      "relay, checkpoint every change, linger.ms=5",
      "relay, batched (100 / 1 s), linger.ms=0",
      "relay, batched (100 / 1 s), linger.ms=5"
    };
    double[] best = new double[names.length];
    try (EmbeddedKafka kafka = EmbeddedKafka.start()) {
      for (int r = 1; r <= rounds; r++) {
        double[] x = {
          drain(changes),
          relay(kafka, "per-change-0-" + r, changes, CheckpointPolicy.everyChange(), 0),
          relay(kafka, "per-change-5-" + r, changes, CheckpointPolicy.everyChange(), 5),
          relay(kafka, "batched-0-" + r, changes, CheckpointPolicy.defaults(), 0),
          relay(kafka, "batched-5-" + r, changes, CheckpointPolicy.defaults(), 5)
        };
        StringBuilder line = new StringBuilder("round " + r + ":");
        for (int i = 0; i < x.length; i++) {
          best[i] = Math.max(best[i], x[i]);
          line.append(String.format(" %.0f/s", x[i]));
        }
        System.out.println(line);
      }
    }
    System.out.printf("%nchanges=%d, best of %d rounds, ratio to the bare drain%n", changes, rounds);
    for (int i = 0; i < names.length; i++) {
      System.out.printf("%-46s %8.0f changes/s  ratio %.3f%n", names[i], best[i], best[i] / best[0]);
    }
    System.out.printf("batched / per-change (linger.ms=0): ratio %.1f%n", best[3] / best[1]);
  }

  private static void prewrite(MongoClient client, int changes) {
    MongoCollection<Document> docs = client.getDatabase("bench").getCollection("orders");
    List<Document> batch = new ArrayList<>();
    for (int i = 0; i < changes; i++) {
      batch.add(new Document("_id", i).append("n", i).append("payload", "x".repeat(100)));
      if (batch.size() == 1000) {
        docs.insertMany(batch);
        batch.clear();
      }
    }
    if (!batch.isEmpty()) {
      docs.insertMany(batch);
    }
  }

  private static double drain(int changes) {
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      prewrite(client, changes);
      long start = System.nanoTime();
      int seen = 0;
      try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor = client.getDatabase("bench")
          .getCollection("orders").watch().fullDocument(FullDocument.UPDATE_LOOKUP)
          .startAtOperationTime(new BsonTimestamp(0, 0)).batchSize(500).cursor()) {
        while (seen < changes) {
          if (cursor.tryNext() != null) {
            seen++;
          }
        }
      }
      return changes / ((System.nanoTime() - start) / 1e9);
    }
  }

  private static double relay(
      EmbeddedKafka kafka, String topic, int changes, CheckpointPolicy policy, int lingerMs)
      throws InterruptedException {
    kafka.createTopic(topic, 3);
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      prewrite(client, changes);
      CommitCounter committed = new CommitCounter(changes);
      try (KafkaSink<BsonDocument> sink = KafkaSink.builder(kafka.bootstrapServers(), topic,
                  MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
              .producerProperty("linger.ms", lingerMs)
              .build()) {
        long start = System.nanoTime();
        try (Listener<BsonDocument> l = Listener.builder(
                MongoChangeFeed.builder(client, "bench", "orders").build(),
                MongoLeaseStore.builder(client.getDatabase("bench")).build()).group("relay")
            .checkpoint(policy)
            .handler(sink)
            .observer(committed)
            .build().start()) {
          committed.awaitAll();
          return changes / ((System.nanoTime() - start) / 1e9);
        }
      }
    }
  }
}
