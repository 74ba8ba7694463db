package dev.sluice.app.demo.views;

import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Updates.combine;
import static com.mongodb.client.model.Updates.set;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;

/**
 * One of the demo's concurrent application writers: creates orders, changes their amount, moves
 * them to another customer, deletes them, and renames and re-tiers its own customers. Every write
 * of a document raises its {@code version} (what the views' guards compare). Each writer owns its
 * orders and a share of the customers, so versions are counted locally without coordination,
 * while orders of any writer may point at any customer.
 */
final class ShopWriter implements Runnable {
  /** What the writers did, by kind. */
  static final class Counts {
    final AtomicInteger total = new AtomicInteger();
    final AtomicInteger created = new AtomicInteger();
    final AtomicInteger updated = new AtomicInteger();
    final AtomicInteger moved = new AtomicInteger();
    final AtomicInteger deleted = new AtomicInteger();
    final AtomicInteger renamed = new AtomicInteger();
    final AtomicInteger retiered = new AtomicInteger();
  }

  private static final List<String> TIERS = List.of("bronze", "silver", "gold", "platinum");

  private final int index;
  private final int writes;
  private final long intervalNanos;
  private final int customers;
  private final MongoCollection<Document> orders;
  private final MongoCollection<Document> customerColl;
  private final Counts counts;
  private final Random random;
  private final Map<String, Integer> orderVersions = new LinkedHashMap<>();
  private final List<String> liveOrders = new ArrayList<>();
  private final Map<String, Integer> customerVersions = new LinkedHashMap<>();
  private int created;

  ShopWriter(MongoDatabase db, int index, int writers, int writes, double ratePerSecond, int customers,
      Counts counts, long seed) {
    this.index = index;
    this.writes = writes;
    this.intervalNanos = (long) (TimeUnit.SECONDS.toNanos(1) / ratePerSecond);
    this.customers = customers;
    this.orders = db.getCollection(ShopViews.ORDERS);
    this.customerColl = db.getCollection(ShopViews.CUSTOMERS);
    this.counts = counts;
    this.random = new Random(seed);
    for (int c = index; c < customers; c += writers) {
      customerVersions.put(customerId(c), 1); // seeded at version 1 by the demo
    }
  }

  static String customerId(int c) {
    return String.format("c%03d", c);
  }

  static Document customer(int c) {
    return new Document("_id", customerId(c)).append("name", "Customer " + c)
        .append("tier", TIERS.get(c % TIERS.size())).append("version", 1);
  }

  @Override
  public void run() {
    long next = System.nanoTime();
    for (int i = 0; i < writes && !Thread.currentThread().isInterrupted(); i++) {
      writeOne();
      counts.total.incrementAndGet();
      next += intervalNanos;
      long wait = next - System.nanoTime();
      if (wait > 0) {
        try {
          TimeUnit.NANOSECONDS.sleep(wait);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
    }
  }

  private void writeOne() {
    int dice = random.nextInt(100);
    if (liveOrders.size() < 5 || dice < 30) {
      String id = "o-" + index + "-" + (created++);
      orders.insertOne(new Document("_id", id).append("customerId", anyCustomer())
          .append("amount", 1 + random.nextInt(100)).append("version", 1));
      orderVersions.put(id, 1);
      liveOrders.add(id);
      counts.created.incrementAndGet();
    } else if (dice < 55) {
      String id = anyOrder();
      orders.updateOne(eq("_id", id), combine(set("amount", 1 + random.nextInt(100)), set("version", bump(id))));
      counts.updated.incrementAndGet();
    } else if (dice < 70) {
      String id = anyOrder();
      orders.updateOne(eq("_id", id), combine(set("customerId", anyCustomer()), set("version", bump(id))));
      counts.moved.incrementAndGet();
    } else if (dice < 80) {
      String id = liveOrders.remove(random.nextInt(liveOrders.size()));
      orders.deleteOne(eq("_id", id));
      counts.deleted.incrementAndGet();
    } else {
      List<String> mine = new ArrayList<>(customerVersions.keySet());
      if (mine.isEmpty()) {
        return;
      }
      String id = mine.get(random.nextInt(mine.size()));
      int version = customerVersions.merge(id, 1, Integer::sum);
      if (dice < 90) {
        customerColl.updateOne(eq("_id", id),
            combine(set("name", "Customer " + id + " v" + version), set("version", version)));
        counts.renamed.incrementAndGet();
      } else {
        customerColl.updateOne(eq("_id", id),
            combine(set("tier", TIERS.get(random.nextInt(TIERS.size()))), set("version", version)));
        counts.retiered.incrementAndGet();
      }
    }
  }

  private int bump(String orderId) {
    return orderVersions.merge(orderId, 1, Integer::sum);
  }

  private String anyOrder() {
    return liveOrders.get(random.nextInt(liveOrders.size()));
  }

  private String anyCustomer() {
    return customerId(random.nextInt(customers));
  }
}
