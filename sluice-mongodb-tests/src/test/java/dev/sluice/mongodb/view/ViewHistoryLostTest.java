package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 14's repair test for views: listeners maintaining the orders/customers views are down while
 * the sources change (inserts, updates, re-keyed orders, deletes) and the oplog rolls past their
 * checkpoints. Started again with RESNAPSHOT and {@link MaterializedView#rebuildOnHistoryLost},
 * with writes going on, both views end equal to the join recomputed from scratch, deleted source
 * documents included. On an embedded server of the test's own, whose oplog the test trims.
 */
class ViewHistoryLostTest {
  private final EmbeddedMongo server = EmbeddedMongo.start();
  private final MongoClient client = server.client();
  private final MongoDatabase db = client.getDatabase("views");
  private final List<Listener<?>> listeners = new ArrayList<>();

  @AfterEach
  void cleanUp() {
    listeners.forEach(Listener::close);
    client.close();
    server.close();
  }

  private List<MaterializedView> views() {
    return List.of(MaterializedView.of(db, OrdersModel.orderView()), MaterializedView.of(db, OrdersModel.customerStats()));
  }

  private void start(String node, List<MaterializedView> views, ListenerObserver observer) {
    for (String source : List.of("orders", "customers")) {
      Listener<BsonDocument> l = Listener.builder(MongoChangeFeed.builder(client, "views", source).batchSize(100).build(),
              MongoLeaseStore.builder(db).build()).group("views")
          .owner(node + "-" + source)
          .partitions(2)
          .leaseDuration(Duration.ofSeconds(3))
          .acquireInterval(Duration.ofMillis(100))
          .pollWait(Duration.ofMillis(50))
          .bootstrap(BootstrapPolicy.oldest())
          .onHistoryLost(HistoryLostPolicy.RESNAPSHOT)
          .checkpoint(CheckpointPolicy.every(20, Duration.ofMillis(200)))
          .observer(observer)
          .handler(MaterializedView.handler(source, views))
          .build();
      listeners.add(l);
      l.start();
    }
  }

  @Test
  void afterLostHistoryTheViewsAreRepairedToTheJoinRecomputedFromScratch() {
    SourceWriter writer = new SourceWriter(db, 7, 40, 8);
    writer.write(200);
    List<MaterializedView> views = views();
    start("first", views, ListenerObserver.NOOP);
    ViewListenerEndToEndTest.awaitConvergence(views);
    listeners.forEach(Listener::close);
    listeners.clear();

    // The gap: changes nobody reads, then the oplog rolls past all of them.
    assertThat(writer.write(300)).isPositive();
    server.loseHistoryUpToNow();

    AtomicInteger gaps = new AtomicInteger();
    ListenerObserver counting = new ListenerObserver() {
      @Override
      public void historyLost(String lease, dev.sluice.feed.HistoryLostException error, dev.sluice.feed.Position resumedAt) {
        gaps.incrementAndGet();
      }
    };
    start("second", views, ListenerObserver.composite(counting, MaterializedView.rebuildOnHistoryLost(views)));
    await().atMost(Duration.ofSeconds(30)).until(() -> gaps.get() >= 4); // two partitions of two sources
    writer.write(100); // while the repair runs
    ViewListenerEndToEndTest.awaitConvergence(views);
  }
}
