package dev.sluice.kafka;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import java.time.Duration;
import org.bson.BsonDocument;

/**
 * A relay (MongoDB change stream to Kafka) in its own JVM, for crash tests. Prints {@code
 * ACQUIRED <epoch>}, {@code DELIVERED <n>} and {@code COMMITTED <changes>} so the test can wait on them.
 *
 * <p>Arguments: mongo connection string, Kafka bootstrap servers, topic, checkpoint every N, source
 * database.
 */
public final class RelayNode {
  private RelayNode() {}

  public static void main(String[] args) throws Exception {
    MongoClient client = MongoClients.create(args[0]);
    KafkaSink<BsonDocument> sink =
        KafkaSink.builder(args[1], args[2], MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
            .flushTimeout(Duration.ofSeconds(5))
            .build();
    Listener<BsonDocument> listener =
        Listener.builder(
                MongoChangeFeed.builder(client, args[4], "orders").batchSize(100).build(),
                MongoLeaseStore.builder(client.getDatabase(args[4])).build()).group("relay")
            .handler(sink)
            .leaseDuration(Duration.ofSeconds(2))
            .acquireInterval(Duration.ofMillis(100))
            .pollWait(Duration.ofMillis(50))
            .checkpoint(CheckpointPolicy.every(Integer.parseInt(args[3]), Duration.ofHours(1)))
            .observer(new ListenerObserver() {
              @Override
              public void acquired(Lease lease) {
                System.out.println("ACQUIRED " + lease.epoch());
              }

              private int delivered;

              @Override
              public void delivered(dev.sluice.feed.ChangeEvent<?> event, long handlerNanos) {
                System.out.println("DELIVERED " + ++delivered);
              }

              @Override
              public void committed(String lease, long epoch, Position position, int changes) {
                System.out.println("COMMITTED " + changes);
              }
            })
            .build();
    listener.start();
    System.out.println("READY");
    Thread.currentThread().join();
  }
}
