package dev.sluice.mongodb.view;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoDatabase;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A real SIGSTOP of the JVM maintaining the views, in the middle of a stream of source writes:
 * another JVM takes the leases over once they expire, writes go on, the paused JVM is resumed
 * and finds its leases lost; the views end equal to the recomputed join.
 */
class ViewPauseTest {
  private static final String LEASE_MS = "1500";
  private InMemoryMongo mongo;
  private MongoDatabase db;
  private final List<ChildJvm> children = new ArrayList<>();

  @BeforeEach
  void setUp() {
    mongo = new InMemoryMongo();
    db = mongo.freshDatabase();
  }

  @AfterEach
  void tearDown() {
    children.forEach(ChildJvm::close);
    mongo.close();
  }

  private ChildJvm node(String name) {
    ChildJvm c = ChildJvm.start(name, ViewNode.class, mongo.uri(), db.getName(), name, LEASE_MS);
    children.add(c);
    return c;
  }

  private static void awaitBothLeases(ChildJvm node, String what) {
    for (String source : List.of(".orders#0", ".customers#0")) {
      node.awaitLine(
          l -> l.startsWith(what + " " + node.name() + " ") && l.contains(source),
          Duration.ofSeconds(30));
    }
  }

  @Test
  void pausedListenerJvmIsTakenOverAndTheViewsStillConverge() {
    SourceWriter writer = new SourceWriter(db, 7, 25, 5);
    ChildJvm a = node("a");
    awaitBothLeases(a, "ACQUIRED");
    writer.write(150);
    a.pause(); // SIGSTOP, most likely in the middle of the changes just written

    ChildJvm b = node("b");
    awaitBothLeases(b, "ACQUIRED"); // only after a's leases expired
    writer.write(150);

    a.resume(); // SIGCONT: a still believes it holds the leases
    awaitBothLeases(a, "LOST");
    writer.write(100);

    ViewListenerEndToEndTest.awaitConvergence(
        List.of(
            MaterializedView.of(db, OrdersModel.orderView()),
            MaterializedView.of(db, OrdersModel.customerStats())));
    assertThat(a.isAlive()).as("a paused listener stops its partitions, not its JVM").isTrue();
  }
}
