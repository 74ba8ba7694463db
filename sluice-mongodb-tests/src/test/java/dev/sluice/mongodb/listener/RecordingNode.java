package dev.sluice.mongodb.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import dev.sluice.lease.Lease;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.time.Duration;
import org.bson.BsonDocument;
import org.bson.Document;

/**
 * A listener in its own JVM for crash tests: records every delivery ({@code changeNo}, node,
 * epoch) in the {@code deliveries} collection and prints a line per acquisition and per
 * {@code report} deliveries, so the test can wait on it and kill the process mid-stream.
 *
 * <p>Arguments: connection string, database, collection, node name, lease ms, checkpoint every N,
 * bootstrap ({@code oldest}, {@code latest} or {@code snapshot}).
 */
public final class RecordingNode {
  private RecordingNode() {}

  public static void main(String[] args) throws Exception {
    MongoClient client = MongoClients.create(args[0]);
    String db = args[1];
    String name = args[3];
    Duration lease = Duration.ofMillis(Long.parseLong(args[4]));
    int every = Integer.parseInt(args[5]);
    BootstrapPolicy bootstrap = switch (args[6]) {
      case "latest" -> BootstrapPolicy.latest();
      case "snapshot" -> BootstrapPolicy.snapshot();
      default -> BootstrapPolicy.oldest();
    };
    MongoCollection<Document> deliveries = client.getDatabase(db).getCollection("deliveries");
    int[] count = new int[1];

    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(client, db, args[2]).build(),
            MongoLeaseStore.builder(client.getDatabase(db)).build()).group("recorder")
        .owner(name)
        .leaseDuration(lease)
        .renewInterval(lease.dividedBy(3))
        .acquireInterval(Duration.ofMillis(100))
        .pollWait(Duration.ofMillis(50))
        .bootstrap(bootstrap)
        .checkpoint(CheckpointPolicy.every(every, Duration.ofHours(1)))
        .handler((change, fence) -> {
          deliveries.insertOne(new Document("changeNo", change.document().getInt32("changeNo").getValue())
              .append("node", name).append("epoch", fence.epoch()));
          if (++count[0] % 100 == 0) {
            System.out.println("DELIVERED " + count[0]);
          }
        })
        .observer(new ListenerObserver() {
          @Override
          public void acquired(Lease l) {
            System.out.println("ACQUIRED " + name + " epoch=" + l.epoch());
          }

          @Override
          public void committed(String leaseName, long epoch, dev.sluice.feed.Position position, int changes) {
            System.out.println("COMMITTED " + changes);
          }
        })
        .build();
    listener.start();
    System.out.println("READY " + name);
    Thread.currentThread().join();
  }
}
