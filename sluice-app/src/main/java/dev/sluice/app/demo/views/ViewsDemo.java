package dev.sluice.app.demo.views;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.mongodb.view.MaterializedView;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * The views demo (seed 000, figures 1-3 at scale): two processes maintain an order view and a
 * customer stats view while a writer changes orders and customers; the process owning the orders
 * lease is frozen with SIGSTOP in the middle, the other takes over, the frozen one is resumed and
 * loses its leases. At the end both views are compared with the join recomputed from scratch.
 */
public final class ViewsDemo {
  static final String ORDERS_LEASE = ShopViews.DATABASE + ".orders#0";

  /** Demo parameters. */
  public record Settings(int writes, int ratePerSecond, Duration lease, int customers) {}

  /** What the verification found. */
  public record Result(int writes, int viewDocuments, int differences, long takeoverMillis,
      boolean pausedNodeLostItsLease, long convergedMillis) {
    public boolean ok() {
      return differences == 0 && pausedNodeLostItsLease;
    }
  }

  private final Settings settings;
  private final PrintStream out;

  public ViewsDemo(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
  }

  public Result run() throws Exception {
    List<ChildJvm> nodes = new ArrayList<>();
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      out.printf("Embedded MongoDB at %s%n", mongo.connectionString());
      MongoDatabase db = client.getDatabase(ShopViews.DATABASE);
      LeaseStore leases = MongoLeaseStore.builder(db).build();
      for (int i = 1; i <= 2; i++) {
        nodes.add(ChildJvm.start("views-" + i, ViewsDemoNode.class, mongo.connectionString(), "views-" + i,
            Long.toString(settings.lease().toMillis())));
      }
      for (ChildJvm node : nodes) {
        node.awaitLineStartingWith("READY", Duration.ofSeconds(60));
      }
      out.printf("Started 2 view processes (lease %d ms); views order_view and customer_stats%n",
          settings.lease().toMillis());

      ShopViews.Writer writer = new ShopViews.Writer(db, 2026, settings.customers());
      AtomicInteger written = new AtomicInteger();
      Thread writing = new Thread(() -> write(writer, written), "views-demo-writer");
      writing.start();

      await("a third of the writes", Duration.ofSeconds(120), () -> written.get() >= settings.writes() / 3);
      LeaseRecord before = await("an orders owner", Duration.ofSeconds(30),
          () -> owner(leases).isPresent(), () -> owner(leases).orElseThrow());
      String ownerNode = before.owner().substring(0, before.owner().indexOf('/'));
      ChildJvm victim = nodes.stream().filter(n -> n.name().equals(ownerNode)).findFirst().orElseThrow();
      victim.pause();
      long pausedAt = System.nanoTime();
      out.printf(">>> SIGSTOP %s (pid %d), owner of %s at epoch %d, while writes go on%n",
          victim.name(), victim.pid(), ORDERS_LEASE, before.epoch());
      LeaseRecord after = await("a takeover", Duration.ofSeconds(60),
          () -> owner(leases).filter(r -> r.epoch() > before.epoch()).isPresent(), () -> owner(leases).orElseThrow());
      long takeoverMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pausedAt);
      out.printf(">>> %s took over with epoch %d after %d ms%n", after.owner(), after.epoch(), takeoverMillis);
      victim.resume();
      String lost = victim.awaitLine(l -> l.startsWith("LOST") && l.contains(ORDERS_LEASE), Duration.ofSeconds(30));
      out.printf(">>> SIGCONT %s: %s%n", victim.name(), lost);

      writing.join();
      long writesDone = System.nanoTime();
      List<MaterializedView> views = ShopViews.views(db);
      out.printf("%d writes done; waiting for the views to converge%n", written.get());
      long deadline = writesDone + TimeUnit.SECONDS.toNanos(120);
      int differences = ShopViews.differences(db, views);
      while (differences != 0 && System.nanoTime() < deadline) {
        TimeUnit.MILLISECONDS.sleep(250);
        differences = ShopViews.differences(db, views);
      }
      long convergedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - writesDone);
      int documents = (int) (views.get(0).target().countDocuments(MaterializedView.live())
          + views.get(1).target().countDocuments(MaterializedView.live()));
      Result result = new Result(written.get(), documents, differences, takeoverMillis, lost != null,
          convergedMillis);
      printTable(result);
      return result;
    } finally {
      nodes.forEach(ChildJvm::close);
    }
  }

  private void write(ShopViews.Writer writer, AtomicInteger written) {
    long interval = TimeUnit.SECONDS.toNanos(1) / settings.ratePerSecond();
    long next = System.nanoTime();
    for (int i = 0; i < settings.writes(); i++) {
      writer.writeOne();
      written.incrementAndGet();
      next += interval;
      long wait = next - System.nanoTime();
      if (wait > 0) {
        try {
          TimeUnit.NANOSECONDS.sleep(wait);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  private static java.util.Optional<LeaseRecord> owner(LeaseStore leases) {
    return leases.read(ORDERS_LEASE).filter(LeaseRecord::isHeld);
  }

  private void printTable(Result r) {
    out.println();
    out.println("+----------------------------------------+----------+");
    out.printf("| %-38s | %8s |%n", "verification", "value");
    out.println("+----------------------------------------+----------+");
    out.printf("| %-38s | %8d |%n", "source writes", r.writes());
    out.printf("| %-38s | %8d |%n", "view documents (both views)", r.viewDocuments());
    out.printf("| %-38s | %8d |%n", "differences from recomputed join", r.differences());
    out.printf("| %-38s | %8d |%n", "takeover after SIGSTOP (ms)", r.takeoverMillis());
    out.printf("| %-38s | %8d |%n", "converged after last write (ms)", r.convergedMillis());
    out.println("+----------------------------------------+----------+");
    out.println(r.ok() ? "RESULT: OK" : "RESULT: FAILED");
  }

  private static void await(String what, Duration timeout, BooleanSupplier condition) throws InterruptedException {
    await(what, timeout, condition, () -> null);
  }

  private static <T> T await(String what, Duration timeout, BooleanSupplier condition,
      java.util.function.Supplier<T> value) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("Demo gave up waiting for " + what + " after " + timeout);
      }
      TimeUnit.MILLISECONDS.sleep(50);
    }
    return value.get();
  }
}
