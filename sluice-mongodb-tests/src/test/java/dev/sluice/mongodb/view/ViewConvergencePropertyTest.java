package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ReplaceOptions;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;

/**
 * Random interleavings of source writes (inserts, updates, re-keying, deletes of orders and
 * customers), deliveries, commits, listener restarts (redelivery from the last checkpoint under
 * a new epoch), listener pauses (a stale owner delivering late with its old fence) and rebuilds:
 * once every change is delivered, both views equal the join recomputed from scratch.
 */
class ViewConvergencePropertyTest {
  private static InMemoryMongo mongo;

  @BeforeContainer
  static void start() {
    mongo = new InMemoryMongo();
  }

  @AfterContainer
  static void stop() {
    mongo.close();
  }

  /** One simulated partition of one source's listener: a log, a checkpoint, an owner epoch. */
  private static final class SimulatedListener {
    final String source;
    final List<ChangeEvent<BsonDocument>> log = new ArrayList<>();
    int checkpoint;
    int next;
    long epoch = 1;
    /** A paused former owner and the change it holds. */
    ChangeEvent<BsonDocument> pausedChange;
    Fence pausedFence;

    SimulatedListener(String source) {
      this.source = source;
    }

    Fence fence() {
      return new Fence(source + "#0", "owner-" + epoch, epoch);
    }
  }

  @Property(tries = 30)
  void viewsEqualTheRecomputedJoinAfterAnyInterleaving(
      @ForAll @Size(min = 5, max = 70) List<@IntRange(min = 0, max = 999_999) Integer> steps) {
    MongoDatabase db = mongo.freshDatabase();
    List<MaterializedView> views =
        List.of(
            MaterializedView.of(db, OrdersModel.orderView()),
            MaterializedView.of(db, OrdersModel.customerStats()));
    Map<String, SimulatedListener> listeners =
        Map.of("orders", new SimulatedListener("orders"), "customers", new SimulatedListener("customers"));
    Map<String, Integer> versions = new HashMap<>();

    for (int step : steps) {
      int kind = step % 100;
      int a = (step / 100) % 10;
      int b = (step / 1000) % 10;
      int c = (step / 10000) % 100;
      SimulatedListener l = listeners.get(a % 2 == 0 ? "orders" : "customers");
      if (kind < 40) {
        write(db, listeners, versions, a, b, c);
      } else if (kind < 75) {
        deliver(views, l, l.fence());
        if (b < 5) {
          l.checkpoint = l.next;
        }
      } else if (kind < 82) {
        // Crash and restart: a new owner resumes at the checkpoint.
        l.epoch++;
        l.next = l.checkpoint;
      } else if (kind < 90) {
        // Pause: the owner holds its next change; a new owner takes over from the checkpoint.
        if (l.pausedChange == null && l.next < l.log.size()) {
          l.pausedChange = l.log.get(l.next);
          l.pausedFence = l.fence();
          l.epoch++;
          l.next = l.checkpoint;
        }
      } else if (kind < 96) {
        resume(views, l);
      } else {
        views.get(b % 2).rebuild();
      }
    }
    for (SimulatedListener l : listeners.values()) {
      resume(views, l);
      while (l.next < l.log.size()) {
        deliver(views, l, l.fence());
      }
    }

    assertThat(OrdersModel.liveView(views.get(0))).isEqualTo(OrdersModel.expectedOrderView(db));
    assertThat(OrdersModel.liveView(views.get(1))).isEqualTo(OrdersModel.expectedStats(db));
  }

  private static void deliver(List<MaterializedView> views, SimulatedListener l, Fence fence) {
    if (l.next >= l.log.size()) {
      return;
    }
    ChangeEvent<BsonDocument> change = l.log.get(l.next++);
    for (MaterializedView v : views) {
      try {
        v.handler(l.source).handle(change, fence);
      } catch (Exception e) {
        throw new AssertionError("live delivery of " + change + " failed", e);
      }
    }
  }

  /** The paused owner wakes and finishes its change: fenced off or harmless, never wrong. */
  private static void resume(List<MaterializedView> views, SimulatedListener l) {
    if (l.pausedChange == null) {
      return;
    }
    for (MaterializedView v : views) {
      try {
        v.handler(l.source).handle(l.pausedChange, l.pausedFence);
      } catch (StaleFenceException expected) {
        // the engine would stop this partition here
      } catch (Exception e) {
        throw new AssertionError("stale delivery failed unexpectedly", e);
      }
    }
    l.pausedChange = null;
  }

  private static void write(
      MongoDatabase db,
      Map<String, SimulatedListener> listeners,
      Map<String, Integer> versions,
      int a,
      int b,
      int c) {
    boolean order = a % 2 == 0;
    String collection = order ? "orders" : "customers";
    String id = (order ? "o" : "c") + (b % (order ? 6 : 4));
    MongoCollection<BsonDocument> coll = db.getCollection(collection, BsonDocument.class);
    Operation op;
    if (c < 20) {
      if (coll.deleteOne(Filters.eq("_id", id)).getDeletedCount() == 0) {
        return;
      }
      op = Operation.DELETE;
    } else {
      // Versions keep increasing across delete and re-insert, as the view requires.
      int version = versions.merge(collection + id, 1, Integer::sum);
      BsonDocument doc =
          order
              ? OrdersModel.order(id, "c" + (c % 5), c, version)
              : OrdersModel.customer(id, "name" + c, c % 2 == 0 ? "gold" : "silver", version);
      doc.put("version", new BsonInt32(version));
      boolean existed =
          coll.replaceOne(Filters.eq("_id", id), doc, new ReplaceOptions().upsert(true))
                  .getMatchedCount()
              == 1;
      op = existed ? Operation.UPDATE : Operation.INSERT;
    }
    listeners.get(collection).log.add(Changes.of(db, collection, op, new BsonString(id)));
  }
}
