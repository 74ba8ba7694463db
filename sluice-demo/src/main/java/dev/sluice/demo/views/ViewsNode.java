package dev.sluice.demo.views;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import dev.sluice.lease.Lease;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.mongodb.view.MaterializedView;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonDocument;

/**
 * One process of the views demo: a listener per source collection (orders, customers), each
 * maintaining both views. Run in its own JVM so that the demo can freeze it with SIGSTOP.
 *
 * <p>Prints {@code READY <node>}, {@code ACQUIRED <node> <lease> <epoch>}, {@code LOST <node>
 * <lease> <epoch> <reason>}, and {@code CAUGHT-UP <node> <source> <epoch>} once it has handled the
 * demo's sentinel document of a source (the last write of the run): every earlier change of that
 * source has then been handled.
 *
 * <p>Arguments: connection string, node name, lease milliseconds, checkpoint batch size.
 */
public final class ViewsNode {
  private ViewsNode() {}

  public static void main(String[] args) throws Exception {
    String node = args[1];
    Duration lease = Duration.ofMillis(Long.parseLong(args[2]));
    int checkpointEvery = Integer.parseInt(args[3]);
    MongoClient client = MongoClients.create(args[0]);
    MongoDatabase db = client.getDatabase(ShopViews.DATABASE);
    List<MaterializedView> views = ShopViews.views(db);
    ListenerObserver observer = new ListenerObserver() {
      @Override
      public void acquired(Lease l) {
        System.out.println("ACQUIRED " + node + " " + l.name() + " " + l.epoch());
      }

      @Override
      public void lost(String leaseName, long epoch, String reason) {
        System.out.println("LOST " + node + " " + leaseName + " " + epoch + " " + reason);
      }

      @Override
      public void handlerFailed(dev.sluice.feed.ChangeEvent<?> event, int attempt, Throwable error) {
        System.out.println("HANDLER-FAILED " + node + " " + event + " attempt " + attempt + ": " + error);
      }
    };
    List<Listener<BsonDocument>> listeners = new ArrayList<>();
    for (String source : ShopViews.SOURCES) {
      Handler<BsonDocument> maintain = MaterializedView.handler(source, views);
      Handler<BsonDocument> handler = (change, fence) -> {
        maintain.handle(change, fence);
        if (change.key().contains(ShopViews.SENTINEL)) {
          System.out.println("CAUGHT-UP " + node + " " + source + " " + fence.epoch());
        }
      };
      listeners.add(Listener.builder(
              MongoChangeFeed.builder(client, ShopViews.DATABASE, source).batchSize(100).build(),
              MongoLeaseStore.builder(db).build()).group("views")
          .owner(node)
          .leaseDuration(lease)
          .renewInterval(lease.dividedBy(3))
          .acquireInterval(Duration.ofMillis(100))
          .pollWait(Duration.ofMillis(50))
          .bootstrap(BootstrapPolicy.oldest())
          .checkpoint(CheckpointPolicy.every(checkpointEvery, Duration.ofMillis(200)))
          .observer(observer)
          .handler(handler)
          .build());
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> listeners.forEach(Listener::close)));
    listeners.forEach(Listener::start);
    System.out.println("READY " + node);
    Thread.currentThread().join(); // runs until the demo kills it
  }
}
