package dev.sluice.benchmarks.views;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ReplaceOptions;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.lease.Lease;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.mongodb.view.ViewDefinition;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonString;
import org.bson.BsonValue;

/**
 * View maintenance on the embedded server: a burst of source writes (orders inserted, updated,
 * moved to another customer, deleted; customers renamed) with one listener per source maintaining
 * an order view (join) and a customer stats view (count and total). Reports source changes per
 * second (first write to last change handled) and the convergence time (end of the burst to
 * last change handled), then checks both views against the join recomputed from scratch (must be
 * 0 differences). Baseline: the same listeners with a handler that does nothing.
 *
 * <p>Arguments: writes (default 10000), rounds (default 1).
 */
public final class ViewBenchmark {
  private ViewBenchmark() {}

  private record Result(double changesPerSecond, double convergenceMillis, int differences) {}

  public static void main(String[] args) throws Exception {
    int writes = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    for (int r = 0; r < rounds; r++) {
      Result base = run(writes, false);
      Result views = run(writes, true);
      System.out.printf(
          "round %d: no-op handler %.0f changes/s (drained %.0f ms after the burst);"
              + " views %.0f changes/s (converged %.0f ms after the burst), ratio %.2f,"
              + " differences from the recomputed join: %d%n",
          r + 1,
          base.changesPerSecond(),
          base.convergenceMillis(),
          views.changesPerSecond(),
          views.convergenceMillis(),
          views.changesPerSecond() / base.changesPerSecond(),
          views.differences());
      if (views.differences() != 0) {
        throw new IllegalStateException(views.differences() + " differences");
      }
    }
  }

  private static Result run(int writes, boolean maintainViews) throws Exception {
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      MongoDatabase db = client.getDatabase("bench");
      List<MaterializedView> views =
          List.of(
              MaterializedView.of(
                  db,
                  ViewDefinition.join("order_view")
                      .root("orders", "customerId", "amount")
                      .lookup("customers", "customerId", "customer", "name", "tier")
                      .build()),
              MaterializedView.of(
                  db,
                  ViewDefinition.aggregate("customer_stats")
                      .owner("customers", "name", "tier")
                      .members("orders", "customerId")
                      .count("orderCount")
                      .sum("amount", "orderTotal")
                      .build()));
      AtomicLong handled = new AtomicLong();
      CountDownLatch acquired = new CountDownLatch(2);
      ListenerObserver observer =
          new ListenerObserver() {
            @Override
            public void acquired(Lease lease) {
              acquired.countDown();
            }

            @Override
            public void delivered(ChangeEvent<?> event, long handlerNanos) {
              handled.incrementAndGet();
            }
          };
      List<Listener<BsonDocument>> listeners = new ArrayList<>();
      for (String source : List.of("orders", "customers")) {
        Handler<BsonDocument> handler =
            maintainViews ? MaterializedView.handler(source, views) : (change, fence) -> {};
        listeners.add(
            Listener.builder(
                    MongoChangeFeed.builder(client, "bench", source).batchSize(500).build(),
                    MongoLeaseStore.builder(db).build()).group("views")
                .leaseDuration(Duration.ofSeconds(10))
                .pollWait(Duration.ofMillis(100))
                // Not latest(): a lease can be acquired before the cursor opens, and a cursor opened
                // at "latest" after the burst began would miss its first writes and wait forever
                // (a smoke run hung so). The collections are new, so oldest() reads the burst alone.
                .bootstrap(BootstrapPolicy.oldest())
                .checkpoint(CheckpointPolicy.defaults())
                .observer(observer)
                .handler(handler)
                .build()
                .start());
      }
      try {
        if (!acquired.await(30, TimeUnit.SECONDS)) {
          throw new IllegalStateException("listeners did not acquire their leases");
        }
        long t0 = System.nanoTime();
        burst(db, writes);
        long t1 = System.nanoTime();
        while (handled.get() < writes) {
          if (System.nanoTime() - t1 > TimeUnit.MINUTES.toNanos(10)) {
            throw new IllegalStateException("only " + handled.get() + " of " + writes + " handled");
          }
          TimeUnit.MILLISECONDS.sleep(5); // polling a counter in a benchmark, not a test
        }
        long t2 = System.nanoTime();
        int differences = maintainViews ? differences(db, views) : 0;
        return new Result(writes / ((t2 - t0) / 1e9), (t2 - t1) / 1e6, differences);
      } finally {
        listeners.forEach(Listener::close);
      }
    }
  }

  /** Exactly {@code writes} effective writes: each produces one change. */
  private static void burst(MongoDatabase db, int writes) {
    MongoCollection<BsonDocument> orders = db.getCollection("orders", BsonDocument.class);
    MongoCollection<BsonDocument> customers = db.getCollection("customers", BsonDocument.class);
    Random random = new Random(7);
    Map<String, Integer> versions = new HashMap<>();
    Set<String> existing = new HashSet<>();
    for (int i = 0; i < writes; i++) {
      boolean order = random.nextInt(10) < 8;
      String id = order ? "o" + random.nextInt(2000) : "c" + random.nextInt(200);
      MongoCollection<BsonDocument> coll = order ? orders : customers;
      if (order && existing.contains(id) && random.nextInt(20) == 0) {
        coll.deleteOne(Filters.eq("_id", id));
        existing.remove(id);
        continue;
      }
      int version = versions.merge(id, 1, Integer::sum);
      BsonDocument doc = new BsonDocument("_id", new BsonString(id)).append("version", new BsonInt32(version));
      if (order) {
        doc.append("customerId", new BsonString("c" + random.nextInt(200)))
            .append("amount", new BsonInt32(random.nextInt(1000)));
      } else {
        doc.append("name", new BsonString("name" + i)).append("tier", new BsonString(i % 3 == 0 ? "gold" : "silver"));
      }
      coll.replaceOne(Filters.eq("_id", id), doc, new ReplaceOptions().upsert(true));
      existing.add(id);
    }
  }

  private static int differences(MongoDatabase db, List<MaterializedView> views) {
    Map<BsonValue, BsonDocument> customers = new HashMap<>();
    db.getCollection("customers", BsonDocument.class).find().forEach(c -> customers.put(c.get("_id"), c));
    Map<BsonValue, BsonDocument> expectedOrders = new HashMap<>();
    Map<BsonValue, BsonDocument> expectedStats = new HashMap<>();
    customers.forEach((id, c) -> expectedStats.put(id, new BsonDocument("_id", id)
        .append("name", c.get("name")).append("tier", c.get("tier"))
        .append("orderCount", new BsonInt64(0)).append("orderTotal", new BsonInt64(0))));
    for (BsonDocument o : db.getCollection("orders", BsonDocument.class).find()) {
      BsonDocument c = customers.get(o.get("customerId"));
      expectedOrders.put(o.get("_id"), new BsonDocument("_id", o.get("_id"))
          .append("customerId", o.get("customerId")).append("amount", o.get("amount"))
          .append("customer", c == null ? BsonNull.VALUE
              : new BsonDocument("name", c.get("name")).append("tier", c.get("tier"))));
      BsonDocument s = expectedStats.computeIfAbsent(o.get("customerId"), k -> new BsonDocument("_id", k)
          .append("orderCount", new BsonInt64(0)).append("orderTotal", new BsonInt64(0)));
      s.put("orderCount", new BsonInt64(s.getInt64("orderCount").getValue() + 1));
      s.put("orderTotal", new BsonInt64(s.getInt64("orderTotal").getValue() + o.getNumber("amount").longValue()));
    }
    return compare(views.get(0), expectedOrders) + compare(views.get(1), expectedStats);
  }

  private static int compare(MaterializedView view, Map<BsonValue, BsonDocument> expected) {
    Map<BsonValue, BsonDocument> actual = new HashMap<>();
    view.target().find(MaterializedView.live()).forEach(d -> {
      d.remove("_sluice");
      actual.put(d.get("_id"), d);
    });
    Set<BsonValue> ids = new HashSet<>(expected.keySet());
    ids.addAll(actual.keySet());
    int diff = 0;
    for (BsonValue id : ids) {
      if (!Objects.equals(expected.get(id), actual.get(id))) {
        diff++;
      }
    }
    return diff;
  }
}
