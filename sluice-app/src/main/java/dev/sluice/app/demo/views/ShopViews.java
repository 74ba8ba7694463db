package dev.sluice.app.demo.views;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ReplaceOptions;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.mongodb.view.ViewDefinition;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonString;
import org.bson.BsonValue;

/**
 * The demo shop: orders and customers, the two views maintained from them, a writer of random
 * source changes, and an independent recomputation of both views in plain Java to count
 * differences.
 */
final class ShopViews {
  static final String DATABASE = "shop";

  private ShopViews() {}

  static List<MaterializedView> views(MongoDatabase db) {
    return List.of(
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
  }

  /** Random inserts, updates, re-keying and deletes; versions always increase per _id. */
  static final class Writer {
    private final MongoCollection<BsonDocument> orders;
    private final MongoCollection<BsonDocument> customers;
    private final Random random;
    private final int customerCount;
    private final Map<String, Integer> versions = new HashMap<>();
    private int n;

    Writer(MongoDatabase db, long seed, int customerCount) {
      this.orders = db.getCollection("orders", BsonDocument.class);
      this.customers = db.getCollection("customers", BsonDocument.class);
      this.random = new Random(seed);
      this.customerCount = customerCount;
    }

    void writeOne() {
      n++;
      boolean order = random.nextInt(4) > 0;
      String id = order ? "order-" + random.nextInt(customerCount * 10) : "customer-" + random.nextInt(customerCount);
      MongoCollection<BsonDocument> coll = order ? orders : customers;
      if (random.nextInt(12) == 0) {
        coll.deleteOne(Filters.eq("_id", id));
        return;
      }
      int version = versions.merge(id, 1, Integer::sum);
      BsonDocument doc = new BsonDocument("_id", new BsonString(id)).append("version", new BsonInt32(version));
      if (order) {
        // customerCount + 1 ids: some orders point at a customer that does not exist (yet)
        doc.append("customerId", new BsonString("customer-" + random.nextInt(customerCount + 1)))
            .append("amount", new BsonInt32(10 + random.nextInt(90)));
      } else {
        doc.append("name", new BsonString("Customer " + n))
            .append("tier", new BsonString(n % 3 == 0 ? "gold" : "silver"));
      }
      coll.replaceOne(Filters.eq("_id", id), doc, new ReplaceOptions().upsert(true));
    }
  }

  /** Documents of the two views that differ from the join recomputed from scratch. */
  static int differences(MongoDatabase db, List<MaterializedView> views) {
    Map<BsonValue, BsonDocument> customers = new HashMap<>();
    db.getCollection("customers", BsonDocument.class).find().forEach(c -> customers.put(c.get("_id"), c));
    Map<BsonValue, BsonDocument> orderView = new HashMap<>();
    Map<BsonValue, BsonDocument> stats = new HashMap<>();
    customers.forEach((id, c) -> stats.put(id, new BsonDocument("_id", id)
        .append("name", c.get("name")).append("tier", c.get("tier"))
        .append("orderCount", new BsonInt64(0)).append("orderTotal", new BsonInt64(0))));
    for (BsonDocument o : db.getCollection("orders", BsonDocument.class).find()) {
      BsonDocument c = customers.get(o.get("customerId"));
      orderView.put(o.get("_id"), new BsonDocument("_id", o.get("_id"))
          .append("customerId", o.get("customerId")).append("amount", o.get("amount"))
          .append("customer", c == null ? BsonNull.VALUE
              : new BsonDocument("name", c.get("name")).append("tier", c.get("tier"))));
      BsonDocument s = stats.computeIfAbsent(o.get("customerId"), k -> new BsonDocument("_id", k)
          .append("orderCount", new BsonInt64(0)).append("orderTotal", new BsonInt64(0)));
      s.put("orderCount", new BsonInt64(s.getInt64("orderCount").getValue() + 1));
      s.put("orderTotal", new BsonInt64(s.getInt64("orderTotal").getValue() + o.getNumber("amount").longValue()));
    }
    return compare(views.get(0), orderView) + compare(views.get(1), stats);
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
