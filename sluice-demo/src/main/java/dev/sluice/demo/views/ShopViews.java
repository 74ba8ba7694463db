package dev.sluice.demo.views;

import com.mongodb.client.MongoDatabase;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.mongodb.view.ViewDefinition;
import java.util.List;

/** The two views of the views demo, declared once for the demo and its listener processes. */
final class ShopViews {
  static final String DATABASE = "shop";
  static final String ORDERS = "orders";
  static final String CUSTOMERS = "customers";
  static final List<String> SOURCES = List.of(ORDERS, CUSTOMERS);
  /** {@code _id} of the last document written to each source; its handling proves a listener caught up. */
  static final String SENTINEL = "zz-sentinel";

  private ShopViews() {}

  /** One document per order, with its customer's name and tier. */
  static ViewDefinition orderView() {
    return ViewDefinition.join("order_view")
        .root(ORDERS, "customerId", "amount")
        .lookup(CUSTOMERS, "customerId", "customer", "name", "tier")
        .build();
  }

  /** One document per customer, with its order count and total. */
  static ViewDefinition customerStats() {
    return ViewDefinition.aggregate("customer_stats")
        .owner(CUSTOMERS, "name", "tier")
        .members(ORDERS, "customerId")
        .count("orderCount")
        .sum("amount", "orderTotal")
        .build();
  }

  static List<MaterializedView> views(MongoDatabase db) {
    return List.of(MaterializedView.of(db, orderView()), MaterializedView.of(db, customerStats()));
  }

  static String leaseName(String source) {
    return "views/" + DATABASE + "." + source + "#0of1";
  }
}
