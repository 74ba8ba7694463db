package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.concurrent.atomic.AtomicReference;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

class ViewBehaviourTest {
  @RegisterExtension static final EmbeddedMongoExtension mongo = new EmbeddedMongoExtension();
  private MongoDatabase db;
  private MongoCollection<BsonDocument> orders;
  private MongoCollection<BsonDocument> customers;
  private MaterializedView orderView;
  private MaterializedView stats;
  private final MutableClock clock = new MutableClock();
  private final Fence fence = new Fence("s#0", "me", 1);

  @BeforeEach
  void setUp() {
    db = mongo.freshDatabase();
    orders = db.getCollection("orders", BsonDocument.class);
    customers = db.getCollection("customers", BsonDocument.class);
    orderView = MaterializedView.of(db, OrdersModel.orderView(), clock);
    stats = MaterializedView.of(db, OrdersModel.customerStats(), clock);
  }

  private void deliver(String source, Operation op, String id) throws Exception {
    var change = Changes.of(db, source, op, new BsonString(id));
    orderView.handler(source).handle(change, fence);
    stats.handler(source).handle(change, fence);
  }

  private BsonDocument stat(String customer) {
    return stats.target().find(Filters.and(Filters.eq("_id", customer), MaterializedView.live())).first();
  }

  private BsonDocument order(String id) {
    return orderView.target().find(Filters.and(Filters.eq("_id", id), MaterializedView.live())).first();
  }

  @Test
  void aggregatesCountAndTotalAndSurviveRedelivery() throws Exception {
    customers.insertOne(OrdersModel.customer("c1", "Ada", "gold", 1));
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    orders.insertOne(OrdersModel.order("o2", "c1", 40, 1));
    for (int i = 0; i < 3; i++) { // at-least-once: every change delivered three times
      deliver("customers", Operation.INSERT, "c1");
      deliver("orders", Operation.INSERT, "o1");
      deliver("orders", Operation.INSERT, "o2");
    }
    assertThat(OrdersModel.strip(stat("c1")))
        .isEqualTo(BsonDocument.parse(
            "{_id: 'c1', name: 'Ada', tier: 'gold', orderCount: {$numberLong: '2'},"
                + " orderTotal: {$numberLong: '70'}}"));
  }

  @Test
  void reKeyedOrderLeavesItsOldCustomerAndJoinsTheNewOne() throws Exception {
    customers.insertOne(OrdersModel.customer("c1", "Ada", "gold", 1));
    customers.insertOne(OrdersModel.customer("c2", "Bob", "silver", 1));
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    deliver("customers", Operation.INSERT, "c1");
    deliver("customers", Operation.INSERT, "c2");
    deliver("orders", Operation.INSERT, "o1");
    assertThat(stat("c1").getInt64("orderCount").getValue()).isEqualTo(1);

    orders.updateOne(
        Filters.eq("_id", "o1"), Updates.combine(Updates.set("customerId", "c2"), Updates.inc("version", 1)));
    deliver("orders", Operation.UPDATE, "o1");

    assertThat(stat("c1").getInt64("orderCount").getValue()).isZero();
    assertThat(stat("c1").getInt64("orderTotal").getValue()).isZero();
    assertThat(stat("c2").getInt64("orderCount").getValue()).isEqualTo(1);
    assertThat(order("o1").getDocument("customer").getString("name").getValue()).isEqualTo("Bob");
  }

  @Test
  void reKeyingSeenOnlyAfterASecondMoveStillRecomputesTheFirstGroup() throws Exception {
    // o1 moves c1 -> c2 -> c3 before the listener sees any of it: its first delivery already
    // reads c3; c1's aggregate (never containing o1) and the record of c1 must still be right.
    customers.insertOne(OrdersModel.customer("c1", "Ada", "gold", 1));
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    deliver("orders", Operation.INSERT, "o1");
    assertThat(stat("c1").getInt64("orderCount").getValue()).isEqualTo(1);
    orders.updateOne(Filters.eq("_id", "o1"), Updates.combine(Updates.set("customerId", "c2"), Updates.inc("version", 1)));
    orders.updateOne(Filters.eq("_id", "o1"), Updates.combine(Updates.set("customerId", "c3"), Updates.inc("version", 1)));
    deliver("orders", Operation.UPDATE, "o1");
    deliver("orders", Operation.UPDATE, "o1");
    assertThat(stat("c1").getInt64("orderCount").getValue()).isZero();
    assertThat(stat("c2")).isNull();
    assertThat(stat("c3").getInt64("orderCount").getValue()).isEqualTo(1);
    assertThat(stat("c3").containsKey("name")).isFalse(); // c3 has no customer document yet
  }

  @Test
  void deletesBecomeTombstonesThatPruningRemovesAfterTheHorizon() throws Exception {
    customers.insertOne(OrdersModel.customer("c1", "Ada", "gold", 1));
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    deliver("customers", Operation.INSERT, "c1");
    deliver("orders", Operation.INSERT, "o1");

    orders.deleteOne(Filters.eq("_id", "o1"));
    deliver("orders", Operation.DELETE, "o1");
    assertThat(order("o1")).isNull();
    assertThat(stat("c1").getInt64("orderCount").getValue()).isZero();
    BsonDocument tombstone = orderView.target().find(Filters.eq("_id", "o1")).first();
    assertThat(tombstone.getDocument("_sluice").getBoolean("deleted").getValue()).isTrue();
    assertThat(tombstone.keySet()).containsExactlyInAnyOrder("_id", "_sluice");

    customers.deleteOne(Filters.eq("_id", "c1"));
    deliver("customers", Operation.DELETE, "c1");
    assertThat(stat("c1")).isNull();

    clock.advance(Duration.ofMinutes(5));
    assertThat(orderView.pruneTombstones(Duration.ofMinutes(10))).isZero();
    clock.advance(Duration.ofMinutes(6));
    assertThat(orderView.pruneTombstones(Duration.ofMinutes(10))).isEqualTo(1);
    assertThat(orderView.target().countDocuments()).isZero();
    // stats: the c1 tombstone and o1's membership tombstone
    assertThat(stats.pruneTombstones(Duration.ofMinutes(10))).isEqualTo(2);
    assertThat(stats.target().countDocuments()).isZero();
    assertThat(db.getCollection("customer_stats_sluice_members").countDocuments()).isZero();
  }

  @Test
  void staleRecomputationCannotResurrectADeletedTarget() throws Exception {
    customers.insertOne(OrdersModel.customer("c1", "Ada", "gold", 1));
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    // A recomputation (a rebuild, a paused listener) reads o1, then stalls before writing...
    AtomicReference<Runnable> stalled = new AtomicReference<>();
    var maintainer = (AbstractMaintainer<?>) orderView;
    long staleTicket = maintainer.writer.ticket(new BsonString("o1"));
    var staleRead = maintainer.compute(new BsonString("o1"));
    stalled.set(() -> maintainer.writer.write(
        new BsonString("o1"), staleTicket, staleRead.content(), staleRead.versions(), null));
    // ...meanwhile o1 is deleted and the delete processed...
    orders.deleteOne(Filters.eq("_id", "o1"));
    deliver("orders", Operation.DELETE, "o1");
    // ...then the stale write lands: it must be rejected.
    stalled.get().run();
    assertThat(order("o1")).isNull();
  }

  @Test
  void sourceDocumentsWithoutKeyOrVersionGiveErrorsNamingCollectionIdAndField() {
    orders.insertOne(BsonDocument.parse("{_id: 'o9', customerId: 'c1', amount: 1}"));
    assertThatThrownBy(() -> deliver("orders", Operation.INSERT, "o9"))
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("orders/_id=o9")
        .hasMessageContaining("'version'");
    orders.insertOne(BsonDocument.parse("{_id: 'o8', amount: 1, version: 1}"));
    assertThatThrownBy(() -> orderView.refresh("orders", new BsonString("o8"), null))
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("orders/_id=o8")
        .hasMessageContaining("'customerId'");
    assertThatThrownBy(() -> stats.refresh("orders", new BsonString("o8"), null))
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("customer_stats")
        .hasMessageContaining("orders/_id=o8")
        .hasMessageContaining("'customerId'");
    customers.insertOne(BsonDocument.parse("{_id: 'c7', name: 'x', version: 'one'}"));
    assertThatThrownBy(() -> orderView.refresh("customers", new BsonString("c7"), null))
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("customers/_id=c7")
        .hasMessageContaining("STRING");
    orders.insertOne(BsonDocument.parse("{_id: 'o7', customerId: 'c1', amount: 'ten', version: 1}"));
    assertThatThrownBy(() -> stats.refresh("orders", new BsonString("o7"), null))
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("orders/_id=o7")
        .hasMessageContaining("'amount'");
  }

  @Test
  void rebuildRepairsADamagedViewAndReportsBadDocumentsAfterDoingTheRest() {
    customers.insertOne(OrdersModel.customer("c1", "Ada", "gold", 1));
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    orders.insertOne(OrdersModel.order("o2", "c1", 12, 1));
    orderView.rebuild();
    stats.rebuild();
    // Damage: a hand edit, a lost document, a document whose source never existed.
    orderView.target().updateOne(Filters.eq("_id", "o1"), Updates.set("amount", 999));
    orderView.target().deleteOne(Filters.eq("_id", "o2"));
    orderView.target().insertOne(BsonDocument.parse("{_id: 'ghost', amount: 1}"));
    stats.target().updateOne(Filters.eq("_id", "c1"), Updates.set("orderCount", 0));

    assertThat(orderView.rebuild()).isEqualTo(3);
    stats.rebuild();
    assertThat(OrdersModel.liveView(orderView)).isEqualTo(OrdersModel.expectedOrderView(db));
    assertThat(OrdersModel.liveView(stats)).isEqualTo(OrdersModel.expectedStats(db));

    orders.insertOne(BsonDocument.parse("{_id: 'bad', customerId: 'c1', amount: 1}"));
    assertThatThrownBy(orderView::rebuild)
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("1 source document")
        .hasMessageContaining("orders/_id=bad");
    assertThat(order("o1").getInt32("amount").getValue()).isEqualTo(30);
  }

  @Test
  void changesNamingNoDocumentAreLoggedAndSkippedOrRejectedByName() throws Exception {
    orders.insertOne(OrdersModel.order("o1", "c1", 30, 1));
    var drop =
        new dev.sluice.feed.ChangeEvent<BsonDocument>(
            "d1", "orders", dev.sluice.feed.Position.of("p"), Operation.OTHER, "drop",
            null, null, null, null);
    orderView.handler("orders").handle(drop, fence); // a drop: logged, nothing to recompute
    assertThat(orderView.target().countDocuments()).isZero();

    var noId =
        new dev.sluice.feed.ChangeEvent<BsonDocument>(
            "d2", "orders", dev.sluice.feed.Position.of("p"), Operation.UPDATE, "?",
            BsonDocument.parse("{$set: {amount: 1}}"), null, null, null);
    assertThatThrownBy(() -> orderView.handler("orders").handle(noId, fence))
        .isInstanceOf(ViewException.class)
        .hasMessageContaining("order_view")
        .hasMessageContaining("carries no document _id");
  }

  @Test
  void configurationErrorsNameTheParameter() {
    assertThatThrownBy(() -> ViewDefinition.join("v").build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("root");
    assertThatThrownBy(() -> ViewDefinition.join("v").root("o", "a.b"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("fields");
    assertThatThrownBy(() -> ViewDefinition.join("v").root("o").lookup("o", "x", "y", "z").build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("lookup.collection");
    assertThatThrownBy(() -> ViewDefinition.aggregate("v").owner("c").members("c", "k").build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("members");
    assertThatThrownBy(() -> orderView.handler("payments"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("payments");
  }

  /** A clock the test moves by hand. */
  static final class MutableClock extends Clock {
    private Instant now = Instant.parse("2026-01-01T00:00:00Z");

    void advance(Duration d) {
      now = now.plus(d);
    }

    @Override
    public java.time.ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(java.time.ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now;
    }
  }
}
