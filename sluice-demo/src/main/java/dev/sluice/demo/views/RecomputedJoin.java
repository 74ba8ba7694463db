package dev.sluice.demo.views;

import com.mongodb.client.MongoDatabase;
import dev.sluice.mongodb.view.MaterializedView;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonValue;

/**
 * The views recomputed from scratch in plain Java from the source collections (no Sluice code
 * involved), and the comparison with what the listeners maintained.
 */
final class RecomputedJoin {
  private RecomputedJoin() {}

  /** Differences of one view: ids missing, ids extra, ids whose content differs. */
  record Diff(String view, int checked, Set<String> missing, Set<String> extra, Set<String> different) {
    int count() {
      return missing.size() + extra.size() + different.size();
    }
  }

  static Diff compareOrderView(MongoDatabase db) {
    return compare("order_view", expectedOrderView(db), live(db, "order_view"));
  }

  static Diff compareCustomerStats(MongoDatabase db) {
    return compare("customer_stats", expectedCustomerStats(db), live(db, "customer_stats"));
  }

  private static Diff compare(String view, Map<String, BsonDocument> expected, Map<String, BsonDocument> actual) {
    Set<String> missing = new HashSet<>(expected.keySet());
    missing.removeAll(actual.keySet());
    Set<String> extra = new HashSet<>(actual.keySet());
    extra.removeAll(expected.keySet());
    Set<String> different = new HashSet<>();
    for (var e : expected.entrySet()) {
      BsonDocument a = actual.get(e.getKey());
      if (a != null && !a.equals(e.getValue())) {
        different.add(e.getKey());
      }
    }
    return new Diff(view, expected.size(), missing, extra, different);
  }

  /** The live documents of a view without Sluice's guards ({@code _sluice}). */
  private static Map<String, BsonDocument> live(MongoDatabase db, String view) {
    Map<String, BsonDocument> docs = new TreeMap<>();
    db.getCollection(view, BsonDocument.class).find(MaterializedView.live()).forEach(d -> {
      d.remove("_sluice");
      docs.put(key(d.get("_id")), d);
    });
    return docs;
  }

  /** Every order with its customer's name and tier ({@code customer: null} if there is none). */
  static Map<String, BsonDocument> expectedOrderView(MongoDatabase db) {
    Map<String, BsonDocument> customers = byId(db, ShopViews.CUSTOMERS);
    Map<String, BsonDocument> expected = new TreeMap<>();
    for (BsonDocument o : byId(db, ShopViews.ORDERS).values()) {
      BsonDocument c = customers.get(key(o.get("customerId")));
      expected.put(key(o.get("_id")), new BsonDocument("_id", o.get("_id"))
          .append("customerId", o.get("customerId"))
          .append("amount", o.get("amount"))
          .append("customer", c == null
              ? BsonNull.VALUE
              : new BsonDocument("name", c.get("name")).append("tier", c.get("tier"))));
    }
    return expected;
  }

  /** Every customer with the count and total of its orders. */
  static Map<String, BsonDocument> expectedCustomerStats(MongoDatabase db) {
    Map<String, BsonDocument> expected = new TreeMap<>();
    for (BsonDocument c : byId(db, ShopViews.CUSTOMERS).values()) {
      expected.put(key(c.get("_id")), new BsonDocument("_id", c.get("_id"))
          .append("name", c.get("name"))
          .append("tier", c.get("tier"))
          .append("orderCount", new BsonInt64(0))
          .append("orderTotal", new BsonInt64(0)));
    }
    for (BsonDocument o : byId(db, ShopViews.ORDERS).values()) {
      BsonDocument row = expected.computeIfAbsent(key(o.get("customerId")),
          k -> new BsonDocument("_id", o.get("customerId"))
              .append("orderCount", new BsonInt64(0))
              .append("orderTotal", new BsonInt64(0)));
      row.put("orderCount", new BsonInt64(row.getInt64("orderCount").getValue() + 1));
      row.put("orderTotal", new BsonInt64(
          row.getInt64("orderTotal").getValue() + o.getNumber("amount").longValue()));
    }
    return expected;
  }

  private static Map<String, BsonDocument> byId(MongoDatabase db, String collection) {
    Map<String, BsonDocument> docs = new TreeMap<>();
    db.getCollection(collection, BsonDocument.class).find().forEach(d -> docs.put(key(d.get("_id")), d));
    return docs;
  }

  private static String key(BsonValue id) {
    return id == null ? "null" : id.isString() ? id.asString().getValue() : id.toString();
  }
}
