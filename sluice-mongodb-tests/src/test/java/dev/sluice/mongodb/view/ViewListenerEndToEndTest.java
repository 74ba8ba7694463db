package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoDatabase;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Views maintained by real listeners on real change streams of the embedded server, two
 * partitions per source (so one customer's aggregate is written under several leases): writes run
 * while listeners start, stop and hand over, and a rebuild runs in the middle; the views end equal
 * to the join recomputed from scratch.
 */
class ViewListenerEndToEndTest {
  private InMemoryMongo mongo;
  private MongoDatabase db;
  private String dbName;

  @BeforeEach
  void setUp() {
    mongo = new InMemoryMongo();
    db = mongo.freshDatabase();
    dbName = db.getName();
  }

  @AfterEach
  void tearDown() {
    mongo.close();
  }

  @Test
  void viewsConvergeUnderConcurrentWritesListenerHandoverAndRebuild() throws Exception {
    SourceWriter writer = new SourceWriter(db, 42, 30, 6);
    writer.write(100); // before any listener ran: the bootstrap at the oldest entry covers them
    ExecutorService background = Executors.newSingleThreadExecutor();
    ViewNode first = new ViewNode(mongo.client(), dbName, "first", Duration.ofSeconds(2), 2).start();
    ViewNode second = null;
    try {
      CompletableFuture<Integer> writes =
          CompletableFuture.supplyAsync(() -> writer.write(300), background);
      List<MaterializedView> views = views();
      views.forEach(MaterializedView::rebuild); // while listeners and the writer run
      writes.get(60, TimeUnit.SECONDS);
      first.close(); // hands its leases over at once (released)

      second = new ViewNode(mongo.client(), dbName, "second", Duration.ofSeconds(2), 2).start();
      writer.write(100);
      awaitConvergence(views);
    } finally {
      first.close();
      if (second != null) {
        second.close();
      }
      background.shutdownNow();
    }
  }

  private List<MaterializedView> views() {
    return List.of(
        MaterializedView.of(db, OrdersModel.orderView()),
        MaterializedView.of(db, OrdersModel.customerStats()));
  }

  static void awaitConvergence(List<MaterializedView> views) {
    MongoDatabase source = ((AbstractMaintainer<?>) views.get(0)).db;
    await()
        .atMost(Duration.ofSeconds(60))
        .pollInterval(Duration.ofMillis(200))
        .untilAsserted(
            () -> {
              assertThat(OrdersModel.liveView(views.get(0)))
                  .isEqualTo(OrdersModel.expectedOrderView(source));
              assertThat(OrdersModel.liveView(views.get(1)))
                  .isEqualTo(OrdersModel.expectedStats(source));
            });
  }
}
