package dev.sluice.app.demo.views;

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
import dev.sluice.mongodb.view.MaterializedView;
import java.time.Duration;
import java.util.List;

/**
 * One process of the views demo: a listener per source collection (orders, customers), each
 * maintaining both views. Prints {@code ACQUIRED}, {@code LOST} and {@code READY} lines.
 *
 * <p>Arguments: connection string, node name, lease milliseconds.
 */
public final class ViewsDemoNode {
  private ViewsDemoNode() {}

  public static void main(String[] args) throws Exception {
    MongoClient client = MongoClients.create(args[0]);
    String name = args[1];
    Duration lease = Duration.ofMillis(Long.parseLong(args[2]));
    MongoDatabase db = client.getDatabase(ShopViews.DATABASE);
    List<MaterializedView> views = ShopViews.views(db);
    ListenerObserver observer = new ListenerObserver() {
      @Override
      public void acquired(Lease l) {
        System.out.println("ACQUIRED " + name + " " + l.name() + " epoch=" + l.epoch());
      }

      @Override
      public void lost(String leaseName, long epoch, String reason) {
        System.out.println("LOST " + name + " " + leaseName + " epoch=" + epoch + ": " + reason);
      }
    };
    for (String source : List.of("orders", "customers")) {
      Listener.builder(MongoChangeFeed.builder(client, ShopViews.DATABASE, source).batchSize(200).build(),
              MongoLeaseStore.builder(db).build())
          .owner(name + "/" + source)
          .leaseDuration(lease)
          .acquireInterval(Duration.ofMillis(100))
          .pollWait(Duration.ofMillis(50))
          .bootstrap(BootstrapPolicy.oldest())
          .checkpoint(CheckpointPolicy.every(25, Duration.ofMillis(200)))
          .observer(observer)
          .handler(MaterializedView.handler(source, views))
          .build()
          .start();
    }
    System.out.println("READY " + name);
    Thread.currentThread().join();
  }
}
