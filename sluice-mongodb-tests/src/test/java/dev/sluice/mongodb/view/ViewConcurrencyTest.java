package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ReplaceOptions;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Real concurrency: a writer thread changes the sources while one live listener thread per source
 * maintains both views and a third thread rebuilds them again and again. Once the writer stops
 * and the listeners drained, both views equal the recomputed join.
 */
class ViewConcurrencyTest {
  @RegisterExtension static final EmbeddedMongoExtension mongo = new EmbeddedMongoExtension();

  @Test
  void rebuildsRunningAlongsideLiveListenersConverge() throws Exception {
    for (long seed = 1; seed <= 2; seed++) {
      runOnce(seed);
    }
  }

  private void runOnce(long seed) throws Exception {
    MongoDatabase db = mongo.freshDatabase();
    List<MaterializedView> views =
        List.of(
            MaterializedView.of(db, OrdersModel.orderView()),
            MaterializedView.of(db, OrdersModel.customerStats()));
    LinkedBlockingQueue<ChangeEvent<BsonDocument>> orderChanges = new LinkedBlockingQueue<>();
    LinkedBlockingQueue<ChangeEvent<BsonDocument>> customerChanges = new LinkedBlockingQueue<>();
    AtomicBoolean writing = new AtomicBoolean(true);
    // Own threads: the common pool has one thread on two cores, which would run these in turn.
    ExecutorService threads = Executors.newFixedThreadPool(4);
    try {
      CompletableFuture<Void> writer =
          CompletableFuture.runAsync(
              () -> {
                try {
                  write(db, new Random(seed), orderChanges, customerChanges);
                } finally {
                  writing.set(false);
                }
              },
              threads);
      CompletableFuture<Void> ordersListener =
          CompletableFuture.runAsync(() -> listen(views, "orders", orderChanges, writing), threads);
      CompletableFuture<Void> customersListener =
          CompletableFuture.runAsync(
              () -> listen(views, "customers", customerChanges, writing), threads);
      CompletableFuture<Integer> rebuilder =
          CompletableFuture.supplyAsync(
              () -> {
                int rebuilds = 0;
                while (writing.get() || rebuilds < 2) {
                  views.forEach(MaterializedView::rebuild);
                  rebuilds++;
                }
                return rebuilds;
              },
              threads);

      CompletableFuture.allOf(writer, ordersListener, customersListener, rebuilder)
          .get(60, TimeUnit.SECONDS);
      assertThat(rebuilder.get()).isGreaterThanOrEqualTo(2);
      assertThat(OrdersModel.liveView(views.get(0)))
          .as("order_view, seed %d", seed)
          .isEqualTo(OrdersModel.expectedOrderView(db));
      assertThat(OrdersModel.liveView(views.get(1)))
          .as("customer_stats, seed %d", seed)
          .isEqualTo(OrdersModel.expectedStats(db));
    } finally {
      threads.shutdownNow();
    }
  }

  private static void listen(
      List<MaterializedView> views,
      String source,
      LinkedBlockingQueue<ChangeEvent<BsonDocument>> changes,
      AtomicBoolean writing) {
    Fence fence = new Fence(source + "#0", "live", 1);
    try {
      while (true) {
        // The writer's flag is read before polling, so an empty poll after it turned false
        // means every change was taken.
        boolean stillWriting = writing.get();
        ChangeEvent<BsonDocument> change = changes.poll(20, TimeUnit.MILLISECONDS);
        if (change == null) {
          if (!stillWriting) {
            return;
          }
          continue;
        }
        for (MaterializedView v : views) {
          v.handler(source).handle(change, fence);
        }
      }
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private static void write(
      MongoDatabase db,
      Random random,
      LinkedBlockingQueue<ChangeEvent<BsonDocument>> orderChanges,
      LinkedBlockingQueue<ChangeEvent<BsonDocument>> customerChanges) {
    MongoCollection<BsonDocument> orders = db.getCollection("orders", BsonDocument.class);
    MongoCollection<BsonDocument> customers = db.getCollection("customers", BsonDocument.class);
    int[] orderVersions = new int[20];
    int[] customerVersions = new int[5];
    for (int i = 0; i < 200; i++) {
      boolean order = random.nextInt(3) > 0;
      int n = random.nextInt(order ? 20 : 5);
      String id = (order ? "o" : "c") + n;
      MongoCollection<BsonDocument> coll = order ? orders : customers;
      Operation op;
      if (random.nextInt(6) == 0) {
        if (coll.deleteOne(Filters.eq("_id", id)).getDeletedCount() == 0) {
          continue;
        }
        op = Operation.DELETE;
      } else {
        int version = order ? ++orderVersions[n] : ++customerVersions[n];
        BsonDocument doc =
            order
                ? OrdersModel.order(id, "c" + random.nextInt(6), random.nextInt(100), version)
                : OrdersModel.customer(id, "name" + i, i % 2 == 0 ? "gold" : "silver", version);
        boolean existed =
            coll.replaceOne(Filters.eq("_id", id), doc, new ReplaceOptions().upsert(true))
                    .getMatchedCount()
                == 1;
        op = existed ? Operation.UPDATE : Operation.INSERT;
      }
      String collection = order ? "orders" : "customers";
      (order ? orderChanges : customerChanges)
          .add(Changes.of(db, collection, op, new BsonString(id)));
    }
  }
}
