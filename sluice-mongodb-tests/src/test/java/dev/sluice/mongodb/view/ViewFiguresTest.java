package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonNull;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Figures 1, 2a, 2b and 3 of seed 000, with A = an order and B = its customer. */
class ViewFiguresTest {
  @RegisterExtension static final EmbeddedMongoExtension mongo = new EmbeddedMongoExtension();
  private MongoDatabase db;
  private MongoCollection<BsonDocument> orders;
  private MongoCollection<BsonDocument> customers;
  private MaterializedView view;
  private final BsonValue orderA = new BsonString("A");
  private final BsonValue customerB = new BsonString("B");
  private final Fence fence = new Fence("orders#0", "p1", 1);

  @BeforeEach
  void setUp() {
    db = mongo.freshDatabase();
    orders = db.getCollection("orders", BsonDocument.class);
    customers = db.getCollection("customers", BsonDocument.class);
    view =
        MaterializedView.of(
            db,
            ViewDefinition.join("order_view")
                .root("orders", "customerId", "amount")
                .lookup("customers", "customerId", "customer", "name", "tier")
                .build());
  }

  private void insertOrder() {
    orders.insertOne(
        new BsonDocument("_id", orderA)
            .append("customerId", customerB)
            .append("amount", new BsonInt32(30))
            .append("version", new BsonInt32(1)));
  }

  private void writeCustomer(String name, int version) {
    customers.replaceOne(
        Filters.eq("_id", customerB),
        new BsonDocument("_id", customerB)
            .append("name", new BsonString(name))
            .append("tier", new BsonString("gold"))
            .append("version", new BsonInt32(version)),
        new com.mongodb.client.model.ReplaceOptions().upsert(true));
  }

  private BsonDocument viewOfA() {
    return view.target().find(Filters.eq("_id", orderA)).first();
  }

  private void deliver(String source, Operation op, BsonValue id, Fence f) throws Exception {
    view.handler(source).handle(Changes.of(db, source, op, id), f);
  }

  /**
   * Fig 1: a write of A that looks up B inline, before B exists, stays without B's data; the
   * listener on both collections repairs it.
   */
  @Test
  void figure1_inlineLookupRaceLeavesAStaleButListenerOnBothSourcesConverges() throws Exception {
    // t1 p1: receives the write of A, looks up B: not found.
    BsonDocument lookedUp = customers.find(Filters.eq("_id", customerB)).first();
    // t2 p2: writes B.
    writeCustomer("Ada", 1);
    // t3 p1: writes A with what it looked up.
    MongoCollection<BsonDocument> inline = db.getCollection("orders_inline", BsonDocument.class);
    inline.insertOne(
        new BsonDocument("_id", orderA)
            .append("customer", lookedUp == null ? BsonNull.VALUE : lookedUp));
    insertOrder();
    assertThat(inline.find().first().get("customer")).isEqualTo(BsonNull.VALUE);

    // The listener hears both writes, in either order, and ends consistent.
    deliver("customers", Operation.INSERT, customerB, fence);
    deliver("orders", Operation.INSERT, orderA, fence);
    assertThat(viewOfA().getDocument("customer").getString("name").getValue()).isEqualTo("Ada");
  }

  /** Fig 2a: A is written first; its change finds no B; B's change then finds A and fixes it. */
  @Test
  void figure2a_writeOfAFirstThenB() throws Exception {
    insertOrder(); // t1
    deliver("orders", Operation.INSERT, orderA, fence); // t2: B not found
    assertThat(viewOfA().get("customer")).isEqualTo(BsonNull.VALUE);
    assertThat(viewOfA().getInt32("amount").getValue()).isEqualTo(30);
    writeCustomer("Ada", 1); // t3
    deliver("customers", Operation.INSERT, customerB, fence); // t4: A found, updated
    assertThat(viewOfA().getDocument("customer"))
        .isEqualTo(BsonDocument.parse("{name: 'Ada', tier: 'gold'}"));
  }

  /** Fig 2b: B is written first; its change finds no A; A's insert then finds B. */
  @Test
  void figure2b_writeOfBFirstThenA() throws Exception {
    writeCustomer("Ada", 1); // t1
    deliver("customers", Operation.INSERT, customerB, fence); // t2: no A yet
    assertThat(view.target().countDocuments()).isZero();
    insertOrder(); // t3
    deliver("orders", Operation.INSERT, orderA, fence); // t4: B found
    assertThat(viewOfA().getDocument("customer"))
        .isEqualTo(BsonDocument.parse("{name: 'Ada', tier: 'gold'}"));
  }

  /**
   * Fig 3: p1 receives B v2 and pauses; its lease passes to p2, which writes B v2 and then B v3
   * into A; when p1 resumes, its write of v2 is rejected and it stops (StaleFenceException).
   */
  @Test
  void figure3_pausedStaleListenerIsFencedOffAndStops() throws Exception {
    insertOrder();
    writeCustomer("Ada v1", 1);
    deliver("orders", Operation.INSERT, orderA, new Fence("customers#0", "p0", 0));
    Fence p1 = new Fence("customers#0", "p1", 1);
    Fence p2 = new Fence("customers#0", "p2", 2);
    CountDownLatch p1Paused = new CountDownLatch(1);
    CountDownLatch p1Resume = new CountDownLatch(1);
    ((AbstractMaintainer<?>) view)
        .probe(
            (id, f) -> {
              if (f == p1) {
                p1Paused.countDown();
                await(p1Resume);
              }
            });

    writeCustomer("Ada v2", 2); // t1
    var change = Changes.of(db, "customers", Operation.UPDATE, customerB);
    CompletableFuture<Void> p1Handling =
        CompletableFuture.runAsync(
            () -> {
              try {
                view.handler("customers").handle(change, p1); // t2: reads v2, pauses
              } catch (Exception e) {
                throw new RuntimeException(e);
              }
            });
    assertThat(p1Paused.await(10, TimeUnit.SECONDS)).isTrue();
    // t3: p1's lease expires; t4: p2 takes it over and re-reads from the checkpoint.
    view.handler("customers").handle(change, p2); // t5: writes v2
    writeCustomer("Ada v3", 3); // t6
    deliver("customers", Operation.UPDATE, customerB, p2); // t7: writes v3
    assertThat(viewOfA().getDocument("customer").getString("name").getValue()).isEqualTo("Ada v3");

    p1Resume.countDown(); // t8: p1 resumes and tries to write v2
    assertThatThrownBy(() -> p1Handling.get(10, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .rootCause()
        .isInstanceOf(StaleFenceException.class)
        .hasMessageContaining("customers#0")
        .hasMessageContaining("order_view/_id=A");
    assertThat(viewOfA().getDocument("customer").getString("name").getValue()).isEqualTo("Ada v3");
    assertThat(viewOfA().getDocument("_sluice").getDocument("v").getDocument("customers").getInt64("v").getValue())
        .isEqualTo(3);
  }

  /** The version guard alone: a source version older than the stored one never replaces it. */
  @Test
  void olderSourceVersionNeverOverwritesNewer() throws Exception {
    insertOrder();
    writeCustomer("Ada v5", 5);
    deliver("orders", Operation.INSERT, orderA, null);
    // A writer that read v4 (an older read) with a fresh ticket must not win.
    var writer = ((AbstractMaintainer<?>) view).writer;
    long ticket = writer.ticket(orderA);
    var result =
        writer.write(
            orderA,
            ticket,
            BsonDocument.parse("{customerId: 'B', amount: 30, customer: {name: 'Ada v4'}}"),
            java.util.List.of(
                new TargetWriter.SourceVersion("orders", orderA, 1),
                new TargetWriter.SourceVersion("customers", customerB, 4)),
            null);
    assertThat(result).isEqualTo(TargetWriter.Result.RETRY);
    assertThat(viewOfA().getDocument("customer").getString("name").getValue()).isEqualTo("Ada v5");
  }

  private static void await(CountDownLatch latch) {
    try {
      if (!latch.await(10, TimeUnit.SECONDS)) {
        throw new AssertionError("latch not released");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
