package dev.sluice.mongodb.view;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import dev.sluice.lease.Lease;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonDocument;

/**
 * A process maintaining the orders/customers views: one listener per source collection, both
 * views on each. Used in this JVM by the end-to-end test and as a child JVM by the pause test.
 * Prints {@code ACQUIRED <node> <lease> <epoch>} and {@code LOST <node> <lease> <epoch>} lines.
 *
 * <p>Arguments: connection string, database, node name, lease milliseconds.
 */
public final class ViewNode implements AutoCloseable {
  private final List<Listener<BsonDocument>> listeners = new ArrayList<>();

  ViewNode(MongoClient client, String database, String node, Duration lease) {
    this(client, database, node, lease, 1);
  }

  /** With {@code partitions} partitions per source stream. */
  ViewNode(MongoClient client, String database, String node, Duration lease, int partitions) {
    MongoDatabase db = client.getDatabase(database);
    List<MaterializedView> views =
        List.of(
            MaterializedView.of(db, OrdersModel.orderView()),
            MaterializedView.of(db, OrdersModel.customerStats()));
    ListenerObserver observer =
        new ListenerObserver() {
          @Override
          public void acquired(Lease l) {
            System.out.println("ACQUIRED " + node + " " + l.name() + " " + l.epoch());
          }

          @Override
          public void lost(String leaseName, long epoch, String reason) {
            System.out.println("LOST " + node + " " + leaseName + " " + epoch + " " + reason);
          }
        };
    for (String source : List.of("orders", "customers")) {
      listeners.add(
          Listener.builder(
                  MongoChangeFeed.builder(client, database, source).batchSize(100).build(),
                  MongoLeaseStore.builder(db).build()).group("views")
              .owner(node + "-" + source)
              .partitions(partitions)
              .leaseDuration(lease)
              .renewInterval(lease.dividedBy(3))
              .acquireInterval(Duration.ofMillis(100))
              .pollWait(Duration.ofMillis(50))
              .bootstrap(BootstrapPolicy.oldest())
              .checkpoint(CheckpointPolicy.every(20, Duration.ofMillis(200)))
              .observer(observer)
              .handler(MaterializedView.handler(source, views))
              .build());
    }
  }

  ViewNode start() {
    listeners.forEach(Listener::start);
    return this;
  }

  @Override
  public void close() {
    listeners.forEach(Listener::close);
  }

  public static void main(String[] args) throws Exception {
    MongoClient client = MongoClients.create(args[0]);
    try (ViewNode node =
        new ViewNode(client, args[1], args[2], Duration.ofMillis(Long.parseLong(args[3])))) {
      node.start();
      System.out.println("READY " + args[2]);
      Thread.currentThread().join();
    }
  }
}
