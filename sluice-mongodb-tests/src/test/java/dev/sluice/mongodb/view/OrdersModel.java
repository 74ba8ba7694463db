package dev.sluice.mongodb.view;

import com.mongodb.client.MongoDatabase;
import java.util.Map;
import java.util.TreeMap;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonString;
import org.bson.BsonValue;

/**
 * The orders/customers example, and an oracle: the views recomputed from scratch in plain Java
 * from the source collections, to compare the maintained views with.
 */
final class OrdersModel {
  private OrdersModel() {}

  static JoinView orderView() {
    return ViewDefinition.join("order_view")
        .root("orders", "customerId", "amount")
        .lookup("customers", "customerId", "customer", "name", "tier")
        .build();
  }

  static AggregateView customerStats() {
    return ViewDefinition.aggregate("customer_stats")
        .owner("customers", "name", "tier")
        .members("orders", "customerId")
        .count("orderCount")
        .sum("amount", "orderTotal")
        .build();
  }

  static BsonDocument customer(String id, String name, String tier, int version) {
    return new BsonDocument("_id", new BsonString(id))
        .append("name", new BsonString(name))
        .append("tier", new BsonString(tier))
        .append("version", new BsonInt32(version));
  }

  static BsonDocument order(String id, String customerId, int amount, int version) {
    return new BsonDocument("_id", new BsonString(id))
        .append("customerId", new BsonString(customerId))
        .append("amount", new BsonInt32(amount))
        .append("version", new BsonInt32(version));
  }

  static BsonDocument strip(BsonDocument doc) {
    if (doc == null) {
      return null;
    }
    BsonDocument copy = doc.clone();
    copy.remove("_sluice");
    return copy;
  }

  /** The live documents of a view without their guards, by _id. */
  static Map<BsonValue, BsonDocument> liveView(MaterializedView view) {
    Map<BsonValue, BsonDocument> docs = new TreeMap<>(OrdersModel::compareIds);
    view.target().find(MaterializedView.live()).forEach(d -> docs.put(d.get("_id"), strip(d)));
    return docs;
  }

  private static int compareIds(BsonValue a, BsonValue b) {
    return a.toString().compareTo(b.toString());
  }

  static Map<BsonValue, BsonDocument> expectedOrderView(MongoDatabase db) {
    Map<BsonValue, BsonDocument> customers = byId(db, "customers");
    Map<BsonValue, BsonDocument> expected = new TreeMap<>(OrdersModel::compareIds);
    for (BsonDocument o : byId(db, "orders").values()) {
      BsonDocument row = new BsonDocument("_id", o.get("_id"));
      row.put("customerId", o.get("customerId"));
      row.put("amount", o.get("amount"));
      BsonDocument c = customers.get(o.get("customerId"));
      row.put(
          "customer",
          c == null
              ? BsonNull.VALUE
              : new BsonDocument("name", c.get("name")).append("tier", c.get("tier")));
      expected.put(o.get("_id"), row);
    }
    return expected;
  }

  static Map<BsonValue, BsonDocument> expectedStats(MongoDatabase db) {
    Map<BsonValue, BsonDocument> expected = new TreeMap<>(OrdersModel::compareIds);
    for (BsonDocument c : byId(db, "customers").values()) {
      expected.put(
          c.get("_id"),
          new BsonDocument("_id", c.get("_id"))
              .append("name", c.get("name"))
              .append("tier", c.get("tier"))
              .append("orderCount", new BsonInt64(0))
              .append("orderTotal", new BsonInt64(0)));
    }
    for (BsonDocument o : byId(db, "orders").values()) {
      BsonDocument row =
          expected.computeIfAbsent(
              o.get("customerId"),
              k ->
                  new BsonDocument("_id", k)
                      .append("orderCount", new BsonInt64(0))
                      .append("orderTotal", new BsonInt64(0)));
      row.put("orderCount", new BsonInt64(row.getInt64("orderCount").getValue() + 1));
      row.put(
          "orderTotal",
          new BsonInt64(row.getInt64("orderTotal").getValue() + o.getNumber("amount").longValue()));
    }
    return expected;
  }

  private static Map<BsonValue, BsonDocument> byId(MongoDatabase db, String collection) {
    Map<BsonValue, BsonDocument> docs = new TreeMap<>(OrdersModel::compareIds);
    db.getCollection(collection, BsonDocument.class).find().forEach(d -> docs.put(d.get("_id"), d));
    return docs;
  }
}
