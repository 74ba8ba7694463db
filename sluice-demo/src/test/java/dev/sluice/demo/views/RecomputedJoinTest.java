package dev.sluice.demo.views;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.testkit.mongo.InMemoryMongo;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The demo's oracle finds every kind of difference (so "0 differences" in the demo means
 * something), and agrees with views built by the library from the same sources. On the embedded
 * server, or a real deployment with {@code -Dsluice.mongodb.uri} (a fresh database per test).
 */
class RecomputedJoinTest {
  private InMemoryMongo mongo;
  private MongoClient client;
  private MongoDatabase db;

  @BeforeEach
  void setUp() {
    mongo = new InMemoryMongo();
    client = mongo.client();
    db = mongo.freshDatabase();
    db.getCollection(ShopViews.CUSTOMERS).insertOne(ShopWriter.customer(1));
    db.getCollection(ShopViews.CUSTOMERS).insertOne(ShopWriter.customer(2));
    db.getCollection(ShopViews.ORDERS).insertOne(new Document("_id", "o1").append("customerId", "c001")
        .append("amount", 30).append("version", 1));
    db.getCollection(ShopViews.ORDERS).insertOne(new Document("_id", "o2").append("customerId", "c001")
        .append("amount", 12).append("version", 3));
    db.getCollection(ShopViews.ORDERS).insertOne(new Document("_id", "o3").append("customerId", "c404")
        .append("amount", 5).append("version", 1)); // a customer that does not exist
    ShopViews.views(db).forEach(MaterializedView::rebuild);
  }

  @AfterEach
  void tearDown() {
    mongo.close();
  }

  @Test
  void viewsRebuiltByTheLibraryEqualTheRecomputedJoin() {
    RecomputedJoin.Diff orders = RecomputedJoin.compareOrderView(db);
    RecomputedJoin.Diff stats = RecomputedJoin.compareCustomerStats(db);

    assertThat(orders.count()).as("%s", orders).isZero();
    assertThat(orders.checked()).isEqualTo(3);
    assertThat(stats.count()).as("%s", stats).isZero();
    assertThat(stats.checked()).as("c001, c002 and the orphan group c404").isEqualTo(3);
  }

  @Test
  void everyKindOfDifferenceIsCounted() {
    db.getCollection("order_view").updateOne(Filters.eq("_id", "o1"), Updates.set("customer.tier", "tin"));
    db.getCollection("order_view").insertOne(new Document("_id", "o9").append("amount", 1));
    db.getCollection("customer_stats").deleteOne(Filters.eq("_id", "c002"));
    db.getCollection("customer_stats").updateOne(Filters.eq("_id", "c001"), Updates.set("orderTotal", 41L));

    RecomputedJoin.Diff orders = RecomputedJoin.compareOrderView(db);
    RecomputedJoin.Diff stats = RecomputedJoin.compareCustomerStats(db);

    assertThat(orders.different()).containsExactly("o1");
    assertThat(orders.extra()).containsExactly("o9");
    assertThat(orders.missing()).isEmpty();
    assertThat(stats.missing()).containsExactly("c002");
    assertThat(stats.different()).containsExactly("c001");
    assertThat(orders.count() + stats.count()).isEqualTo(4);
  }
}
