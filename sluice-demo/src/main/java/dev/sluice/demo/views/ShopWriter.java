package dev.sluice.demo.views;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import dev.sluice.demo.Pacer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;
import static com.mongodb.client.model.Filters.eq;

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
  private final Pacer pacer;
  private final int customers;
  private final MongoCollection<Document> orders;
  private final MongoCollection<Document> customerColl;
  private final Counts counts;
  private final Random random;
  private final Map<String, Document> liveOrders = new LinkedHashMap<>();
  private final Map<String, Document> myCustomers = new LinkedHashMap<>();
  private int created;

  ShopWriter(MongoDatabase db, int index, int writers, int writes, double ratePerSecond, int customers,
      Counts counts, long seed) {
    this.index = index;
    this.writes = writes;
    this.pacer = new Pacer(ratePerSecond);
    this.customers = customers;
    this.orders = db.getCollection(ShopViews.ORDERS);
    this.customerColl = db.getCollection(ShopViews.CUSTOMERS);
    this.counts = counts;
    this.random = new Random(seed);
    for (int c = index; c < customers; c += writers) {
      myCustomers.put(customerId(c), customer(c)); // the demo inserts them before the writers start
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
    for (int i = 0; i < writes && !Thread.currentThread().isInterrupted(); i++) {
      writeOne();
      counts.total.incrementAndGet();
      if (!pacer.pace()) {
        return;
      }
    }
  }

  /*
   * Updates are whole-document replacements: the embedded server reports an update's documentKey
   * as the update document itself (without _id, see embedded-servers.md), and when the document is
   * deleted before the feed's lookup there is then no _id left to name it (the change is parked as
   * undecodable); a replacement carries its _id. On real MongoDB both forms name the document.
   */
  private void writeOne() {
    int dice = random.nextInt(100);
    if (dice >= 80 && myCustomers.isEmpty()) {
      dice = 0; // more writers than customers: this one owns none, it creates an order instead
    }
    if (liveOrders.size() < 5 || dice < 30) {
      String id = "o-" + index + "-" + (created++);
      Document order = new Document("_id", id).append("customerId", anyCustomer())
          .append("amount", 1 + random.nextInt(100)).append("version", 1);
      orders.insertOne(order);
      liveOrders.put(id, order);
      counts.created.incrementAndGet();
    } else if (dice < 55) {
      Document order = anyOrder().append("amount", 1 + random.nextInt(100));
      replace(orders, bump(order));
      counts.updated.incrementAndGet();
    } else if (dice < 70) {
      Document order = anyOrder().append("customerId", anyCustomer());
      replace(orders, bump(order));
      counts.moved.incrementAndGet();
    } else if (dice < 80) {
      Document order = anyOrder();
      liveOrders.remove(order.getString("_id"));
      orders.deleteOne(eq("_id", order.getString("_id")));
      counts.deleted.incrementAndGet();
    } else {
      List<Document> mine = new ArrayList<>(myCustomers.values());
      Document customer = mine.get(random.nextInt(mine.size()));
      bump(customer);
      if (dice < 90) {
        customer.append("name", "Customer " + customer.getString("_id") + " v" + customer.getInteger("version"));
        counts.renamed.incrementAndGet();
      } else {
        customer.append("tier", TIERS.get(random.nextInt(TIERS.size())));
        counts.retiered.incrementAndGet();
      }
      replace(customerColl, customer);
    }
  }

  private static void replace(MongoCollection<Document> coll, Document doc) {
    coll.replaceOne(eq("_id", doc.get("_id")), doc);
  }

  private static Document bump(Document doc) {
    return doc.append("version", doc.getInteger("version") + 1);
  }

  private Document anyOrder() {
    List<Document> all = new ArrayList<>(liveOrders.values());
    return all.get(random.nextInt(all.size()));
  }

  private String anyCustomer() {
    return customerId(random.nextInt(customers));
  }
}
