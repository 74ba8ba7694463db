package dev.sluice.demo;

import dev.sluice.lease.OwnerId;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.Document;

/**
 * The demo: three listener processes on one collection, a writer, and the seed's figure 3 played
 * for real: the active owner is frozen with SIGSTOP inside its handler, another instance takes
 * over, the frozen one is resumed, its late write is rejected by the fence and it stops.
 */
public final class Demo {
  static final String DATABASE = "shop";
  static final String LEASE = "demo/" + DATABASE + ".orders#0of1";

  /** Demo parameters. */
  public record Settings(int changes, int ratePerSecond, Duration lease, int checkpointEvery, int customers) {
    public static Settings defaults() {
      return new Settings(3000, 500, Duration.ofSeconds(3), 50, 40);
    }
  }

  /** What the verification found. */
  public record Result(int written, int delivered, int duplicates, int lost, int staleRejected,
      Set<Long> epochs, long takeoverMillis, boolean pausedNodeStopped) {
    public boolean ok() {
      return lost == 0 && staleRejected >= 1 && pausedNodeStopped && delivered == written;
    }
  }

  private final Settings settings;
  private final PrintStream out;

  public Demo(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
  }

  public Result run() throws Exception {
    List<ChildJvm> nodes = new ArrayList<>();
    ScheduledExecutorService status = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "demo-status");
      t.setDaemon(true);
      return t;
    });
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      out.printf("Embedded MongoDB at %s%n", mongo.connectionString());
      MongoCollection<Document> orders = client.getDatabase(DATABASE).getCollection("orders");
      MongoCollection<Document> deliveries = client.getDatabase(DATABASE).getCollection("deliveries");
      MongoCollection<Document> view = client.getDatabase(DATABASE).getCollection(DemoNode.VIEW);
      LeaseStore leases = MongoLeaseStore.builder(client.getDatabase(DATABASE)).build();

      for (int i = 1; i <= 3; i++) {
        ChildJvm node = ChildJvm.start("node-" + i, DemoNode.class, mongo.connectionString(), "node-" + i,
            Long.toString(settings.lease().toMillis()), Integer.toString(settings.checkpointEvery()));
        nodes.add(node);
      }
      for (ChildJvm node : nodes) {
        node.awaitLineStartingWith("READY", Duration.ofSeconds(60));
      }
      out.printf("Started 3 listener processes (lease %d ms, checkpoint every %d changes or 200 ms)%n",
          settings.lease().toMillis(), settings.checkpointEvery());

      AtomicInteger written = new AtomicInteger();
      long started = System.nanoTime();
      status.scheduleAtFixedRate(() -> printStatus(leases, deliveries, written.get(), started), 1, 1, TimeUnit.SECONDS);

      Thread writer = new Thread(() -> write(orders, written), "demo-writer");
      writer.start();

      // Figure 3: freeze the owner inside its handler, before its fenced write.
      Polling.require("a third of the changes written", Duration.ofSeconds(60), () -> written.get() >= settings.changes() / 3);
      LeaseRecord before = Polling.requireValue("an owner", Duration.ofSeconds(30), () -> owner(leases));
      ChildJvm victim = nodes.stream().filter(n -> n.name().equals(OwnerId.labelOf(before.owner()))).findFirst().orElseThrow();
      victim.send("arm");
      String inHandler = victim.awaitLineStartingWith("IN-HANDLER", Duration.ofSeconds(30));
      victim.pause();
      long pausedAt = System.nanoTime();
      int pausedChange = Integer.parseInt(inHandler.replaceAll(".*changeNo=(\\d+).*", "$1"));
      out.printf(">>> SIGSTOP %s (pid %d) inside its handler for change %d at epoch %d%n",
          victim.name(), victim.pid(), pausedChange, before.epoch());

      LeaseRecord after = Polling.requireValue("a takeover", Duration.ofSeconds(60),
          () -> owner(leases).filter(r -> r.epoch() > before.epoch()));
      long takeoverMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pausedAt);
      out.printf(">>> %s took over with epoch %d after %d ms%n", OwnerId.labelOf(after.owner()), after.epoch(), takeoverMillis);
      Polling.require("the new owner to re-process change " + pausedChange, Duration.ofSeconds(60),
          () -> deliveries.countDocuments(new Document("changeNo", pausedChange).append("epoch", after.epoch())) > 0);
      // The handler records a delivery before its fenced write: wait for the new owner's write to the
      // paused change's customer too, or the paused owner's write could land first, find nothing newer
      // and be applied instead of rejected.
      String customer = customerOf(pausedChange);
      Polling.require("the new owner's fenced write for " + customer, Duration.ofSeconds(60),
          () -> newestFence(view, customer) >= after.epoch());

      victim.resume();
      victim.send("go");
      out.printf(">>> SIGCONT %s: it wakes up and finishes its handler with epoch %d%n", victim.name(), before.epoch());
      String rejected = victim.awaitLineStartingWith("STALE-WRITE-REJECTED", Duration.ofSeconds(30));
      String lost = victim.awaitLineStartingWith("LOST", Duration.ofSeconds(30));
      out.printf(">>> %s%n>>> %s%n", rejected, lost);

      writer.join();
      Polling.require("every change delivered", Duration.ofSeconds(120), () -> distinct(deliveries).size() >= written.get());
      Polling.stopQuietly(status);
      printStatus(leases, deliveries, written.get(), started);

      Set<Integer> seen = distinct(deliveries);
      int total = (int) deliveries.countDocuments();
      int lostCount = 0;
      for (int i = 0; i < written.get(); i++) {
        if (!seen.contains(i)) {
          lostCount++;
        }
      }
      Set<Long> epochs = new TreeSet<>();
      deliveries.distinct("epoch", Long.class).into(epochs);
      int stale = 0;
      for (ChildJvm n : nodes) {
        stale += (int) n.output().stream().filter(l -> l.startsWith("STALE-WRITE-REJECTED")).count();
      }
      Result result = new Result(written.get(), seen.size(), total - seen.size(), lostCount, stale, epochs,
          takeoverMillis, lost != null);
      printTable(result);
      return result;
    } finally {
      status.shutdownNow();
      nodes.forEach(ChildJvm::close);
    }
  }

  private void write(MongoCollection<Document> orders, AtomicInteger written) {
    Pacer pacer = new Pacer(settings.ratePerSecond());
    for (int i = 0; i < settings.changes(); i++) {
      orders.insertOne(new Document("_id", "order-" + i).append("changeNo", i)
          .append("customer", customerOf(i)).append("amount", 10 + i % 90));
      written.incrementAndGet();
      if (!pacer.pace()) {
        return;
      }
    }
  }

  private String customerOf(int changeNo) {
    return "customer-" + (changeNo % settings.customers());
  }

  /** The newest epoch of a fenced write to the customer's view document, or -1 if none. */
  private static long newestFence(MongoCollection<Document> view, String customer) {
    Document doc = view.find(new Document("_id", customer)).first();
    Object fences = doc == null ? null : doc.get(FencedWrites.FENCE_FIELD);
    if (!(fences instanceof Document d)) {
      return -1;
    }
    return d.values().stream().filter(Number.class::isInstance).mapToLong(v -> ((Number) v).longValue()).max().orElse(-1);
  }

  private static Optional<LeaseRecord> owner(LeaseStore leases) {
    return leases.read(LEASE).filter(LeaseRecord::isHeld);
  }

  private static Set<Integer> distinct(MongoCollection<Document> deliveries) {
    return deliveries.distinct("changeNo", Integer.class).into(new HashSet<>());
  }

  private void printStatus(LeaseStore leases, MongoCollection<Document> deliveries, int written, long started) {
    try {
      Optional<LeaseRecord> r = owner(leases);
      int processed = distinct(deliveries).size();
      out.printf("[%3ds] owner=%-7s epoch=%-3s processed=%5d written=%5d lag=%5d%n",
          TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started),
          r.map(LeaseRecord::owner).orElse("-"), r.map(x -> Long.toString(x.epoch())).orElse("-"),
          processed, written, Math.max(0, written - processed));
    } catch (RuntimeException e) {
      out.println("status unavailable: " + e);
    }
  }

  private void printTable(Result r) {
    VerificationTable table = new VerificationTable(out, 28, "value");
    table.row("changes written", r.written());
    table.row("changes delivered (distinct)", r.delivered());
    table.row("duplicates (redelivered)", r.duplicates());
    table.row("lost (must be 0)", r.lost());
    table.row("stale writes rejected", r.staleRejected());
    table.row("owner epochs seen", r.epochs().size());
    table.row("takeover after pause (ms)", r.takeoverMillis());
    table.end();
    out.println("epochs (fencing tokens): " + r.epochs());
    out.println(r.ok() ? "RESULT: OK" : "RESULT: FAILED");
  }
}
