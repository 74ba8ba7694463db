package dev.sluice.demo.views;

import dev.sluice.lease.OwnerId;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Indexes;
import dev.sluice.demo.Polling;
import dev.sluice.demo.VerificationTable;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.bson.Document;

/**
 * {@code sluice demo --scenario views}: orders and customers on the embedded MongoDB, two declared
 * views (orders with their customer's name and tier; customers with their order count and total)
 * maintained by listeners in two child JVMs, concurrent application writers, and the active
 * listener JVM frozen with SIGSTOP past its lease in the middle of the stream: the standby takes
 * both leases over, the frozen one is resumed and finds its leases lost. At the end the views are
 * compared with the join recomputed from scratch.
 *
 * <p>"The end" is not a timeout: after the writers stop, a sentinel order and customer are
 * written, and the comparison runs once the listener of each source has handled its sentinel
 * (so it has handled every earlier change of that source).
 */
public final class ViewsDemo {

  /** Demo parameters. */
  public record Settings(int writes, int ratePerSecond, int writers, int customers, Duration lease,
      int checkpointEvery) {
    public Settings {
      if (writes < 30 || ratePerSecond < 1 || writers < 1 || customers < 1
          || lease.toMillis() < 300 || checkpointEvery < 1) {
        throw new IllegalArgumentException("need writes >= 30, rate >= 1, writers >= 1, customers >= 1,"
            + " lease >= 300 ms, checkpointEvery >= 1; got " + this);
      }
    }

    public static Settings defaults() {
      return new Settings(1500, 250, 3, 20, Duration.ofSeconds(3), 20);
    }
  }

  /** What the verification found. */
  public record Result(int writes, Map<String, Integer> writesByKind, int orders, int customers,
      int orderViewDifferences, int customerStatsDifferences, long pausedEpoch, long takeoverEpoch,
      long takeoverMillis, boolean pausedNodeLostItsLeases, List<String> differenceSamples) {
    public int differences() {
      return orderViewDifferences + customerStatsDifferences;
    }

    public boolean ok() {
      return differences() == 0 && takeoverEpoch > pausedEpoch && pausedNodeLostItsLeases;
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
    List<Thread> writers = new ArrayList<>();
    ScheduledExecutorService status = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "demo-status");
      t.setDaemon(true);
      return t;
    });
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      MongoDatabase db = client.getDatabase(ShopViews.DATABASE);
      LeaseStore leases = MongoLeaseStore.builder(db).build();
      out.printf("Embedded MongoDB at %s%n", mongo.connectionString());
      db.getCollection(ShopViews.ORDERS).createIndex(Indexes.ascending("customerId"));
      List<Document> seed = new ArrayList<>();
      for (int c = 0; c < settings.customers(); c++) {
        seed.add(ShopWriter.customer(c));
      }
      db.getCollection(ShopViews.CUSTOMERS).insertMany(seed);
      out.printf("Views: order_view (order + customer name, tier), customer_stats (customer + order count,"
          + " total); %d customers%n", settings.customers());

      ChildJvm first = startNode("node-1", mongo, nodes);
      first.awaitLineStartingWith("READY", Duration.ofSeconds(60));
      for (String source : ShopViews.SOURCES) {
        first.awaitLine(l -> l.startsWith("ACQUIRED node-1 " + ShopViews.leaseName(source) + " "),
            Duration.ofSeconds(30));
      }
      ChildJvm standby = startNode("node-2", mongo, nodes);
      standby.awaitLineStartingWith("READY", Duration.ofSeconds(60));
      out.printf("node-1 (pid %d) holds both leases; node-2 (pid %d) stands by; lease %d ms%n",
          first.pid(), standby.pid(), settings.lease().toMillis());

      ShopWriter.Counts counts = new ShopWriter.Counts();
      java.util.Queue<String> writerFailures = new java.util.concurrent.ConcurrentLinkedQueue<>();
      int each = settings.writes() / settings.writers();
      for (int w = 0; w < settings.writers(); w++) {
        int n = w == 0 ? settings.writes() - each * (settings.writers() - 1) : each;
        Thread t = new Thread(new ShopWriter(db, w, settings.writers(), n,
            (double) settings.ratePerSecond() / settings.writers(), settings.customers(), counts, 1000L + w),
            "demo-writer-" + w);
        t.setUncaughtExceptionHandler((thread, e) -> writerFailures.add(thread.getName() + ": " + e));
        writers.add(t);
        t.start();
      }
      out.printf("%d writers started: %d writes at about %d/s%n", settings.writers(), settings.writes(),
          settings.ratePerSecond());
      long started = System.nanoTime();
      status.scheduleAtFixedRate(() -> printStatus(leases, counts, started), 1, 1, TimeUnit.SECONDS);

      Polling.require("a third of the writes", Duration.ofSeconds(120),
          () -> counts.total.get() >= settings.writes() / 3 || !writerFailures.isEmpty());
      // The active node is whoever holds the orders lease now (node-1 unless a renewal failed on
      // a busy machine); it is frozen together with every lease it holds.
      LeaseRecord ordersLease = owner(leases, ShopViews.ORDERS)
          .orElseThrow(() -> new IllegalStateException("nobody holds the orders lease"));
      ChildJvm paused = OwnerId.labelOf(ordersLease.owner()).equals(first.name()) ? first : standby;
      ChildJvm other = paused == first ? standby : first;
      Map<String, Long> pausedLeases = new TreeMap<>();
      for (String source : ShopViews.SOURCES) {
        owner(leases, source).filter(r -> OwnerId.labelOf(r.owner()).equals(paused.name()))
            .ifPresent(r -> pausedLeases.put(source, r.epoch()));
      }
      paused.pause();
      long pausedAt = System.nanoTime();
      long pausedEpoch = ordersLease.epoch();
      out.printf(">>> SIGSTOP %s (pid %d) holding %s, after %d writes%n", paused.name(), paused.pid(),
          pausedLeases.keySet(), counts.total.get());

      for (var e : pausedLeases.entrySet()) {
        String prefix = "ACQUIRED " + other.name() + " " + ShopViews.leaseName(e.getKey()) + " ";
        other.awaitLine(l -> l.startsWith(prefix) && Long.parseLong(l.substring(prefix.length()).trim()) > e.getValue(),
            Duration.ofSeconds(60));
      }
      long takeoverMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pausedAt);
      long takeoverEpoch = owner(leases, ShopViews.ORDERS).map(LeaseRecord::epoch).orElse(-1L);
      out.printf(">>> %s took %s over after %d ms (orders epoch %d -> %d), writes go on (%d so far)%n",
          other.name(), pausedLeases.keySet(), takeoverMillis, pausedEpoch, takeoverEpoch, counts.total.get());

      Polling.require("two thirds of the writes", Duration.ofSeconds(120),
          () -> counts.total.get() >= 2 * settings.writes() / 3 || !writerFailures.isEmpty());
      paused.resume();
      out.printf(">>> SIGCONT %s after %d ms frozen%n", paused.name(),
          TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pausedAt));
      boolean lostAll = true;
      for (var e : pausedLeases.entrySet()) {
        String prefix = "LOST " + paused.name() + " " + ShopViews.leaseName(e.getKey()) + " " + e.getValue() + " ";
        String lost = paused.awaitLine(l -> l.startsWith(prefix), Duration.ofSeconds(30));
        out.printf(">>> %s%n", lost);
        lostAll &= lost != null;
      }

      for (Thread t : writers) {
        t.join();
      }
      if (!writerFailures.isEmpty()) {
        throw new IllegalStateException("A demo writer failed, so the run proves nothing: " + writerFailures);
      }
      out.printf("Writers done: %d writes. Writing the sentinels and waiting for the listeners to catch up%n",
          counts.total.get());
      db.getCollection(ShopViews.CUSTOMERS).insertOne(new Document("_id", ShopViews.SENTINEL)
          .append("name", "Sentinel").append("tier", "none").append("version", 1));
      db.getCollection(ShopViews.ORDERS).insertOne(new Document("_id", ShopViews.SENTINEL)
          .append("customerId", ShopViews.SENTINEL).append("amount", 1).append("version", 1));
      for (String source : ShopViews.SOURCES) {
        String line = awaitAny(nodes, "CAUGHT-UP", source, Duration.ofSeconds(120));
        out.printf("    %s%n", line);
      }

      Polling.stopQuietly(status);
      RecomputedJoin.Diff orderView = RecomputedJoin.compareOrderView(db);
      RecomputedJoin.Diff stats = RecomputedJoin.compareCustomerStats(db);
      List<String> samples = new ArrayList<>();
      for (RecomputedJoin.Diff d : List.of(orderView, stats)) {
        d.missing().stream().limit(5).forEach(id -> samples.add(d.view() + " missing " + id));
        d.extra().stream().limit(5).forEach(id -> samples.add(d.view() + " extra " + id));
        d.different().stream().limit(5).forEach(id -> samples.add(d.view() + " differs " + id));
      }
      Map<String, Integer> byKind = new TreeMap<>(Map.of(
          "orders created", counts.created.get(), "orders updated", counts.updated.get(),
          "orders moved", counts.moved.get(), "orders deleted", counts.deleted.get(),
          "customers renamed", counts.renamed.get(), "customers re-tiered", counts.retiered.get()));
      Result result = new Result(counts.total.get(), byKind, orderView.checked(), stats.checked(),
          orderView.count(), stats.count(), pausedEpoch, takeoverEpoch, takeoverMillis, lostAll, samples);
      printTable(result);
      return result;
    } catch (Exception | AssertionError e) {
      for (ChildJvm n : nodes) {
        List<String> lines = n.output();
        out.printf("--- last lines of %s (pid %d)%n", n.name(), n.pid());
        lines.subList(Math.max(0, lines.size() - 40), lines.size()).forEach(out::println);
      }
      throw e;
    } finally {
      status.shutdownNow();
      writers.forEach(Thread::interrupt);
      nodes.forEach(ChildJvm::close);
    }
  }

  private ChildJvm startNode(String name, EmbeddedMongo mongo, List<ChildJvm> nodes) {
    ChildJvm node = ChildJvm.start(name, ViewsNode.class, mongo.connectionString(), name,
        Long.toString(settings.lease().toMillis()), Integer.toString(settings.checkpointEvery()));
    nodes.add(node);
    return node;
  }

  private void printStatus(LeaseStore leases, ShopWriter.Counts counts, long started) {
    try {
      StringBuilder line = new StringBuilder(String.format("[%3ds] writes=%5d",
          TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started), counts.total.get()));
      for (String source : ShopViews.SOURCES) {
        Optional<LeaseRecord> r = owner(leases, source);
        line.append(String.format("  %s: %s", source,
            r.map(x -> x.owner() + " epoch " + x.epoch() + checkpointTime(x)).orElse("(lease expired)")));
      }
      out.println(line);
    } catch (RuntimeException e) {
      out.println("status unavailable: " + e);
    }
  }

  private static String checkpointTime(LeaseRecord r) {
    return r.checkpoint() == null || r.checkpoint().time() == null ? ""
        : " checkpoint at " + java.time.LocalTime.ofInstant(r.checkpoint().time(), java.time.ZoneOffset.UTC)
            .truncatedTo(java.time.temporal.ChronoUnit.SECONDS);
  }

  private static Optional<LeaseRecord> owner(LeaseStore leases, String source) {
    return leases.read(ShopViews.leaseName(source)).filter(LeaseRecord::isHeld);
  }

  /** The first line of any node starting with {@code prefix} and naming {@code source}. */
  private static String awaitAny(List<ChildJvm> nodes, String prefix, String source, Duration timeout)
      throws InterruptedException {
    String[] found = new String[1];
    Polling.require(prefix + " " + source, timeout, () -> {
      for (ChildJvm n : nodes) {
        for (String l : n.output()) {
          if (l.startsWith(prefix + " ") && l.split(" ")[2].equals(source)) {
            found[0] = l;
            return true;
          }
        }
      }
      return false;
    });
    return found[0];
  }

  private void printTable(Result r) {
    VerificationTable table = new VerificationTable(out, 38, "value");
    table.row("source writes", r.writes());
    r.writesByKind().forEach((k, v) -> table.row("  " + k, v));
    table.row("orders (recomputed join)", r.orders());
    table.row("customers (recomputed join)", r.customers());
    table.row("order_view differences (must be 0)", r.orderViewDifferences());
    table.row("customer_stats differences (must be 0)", r.customerStatsDifferences());
    table.row("takeover after SIGSTOP (ms)", r.takeoverMillis());
    table.row("paused node lost its leases", r.pausedNodeLostItsLeases() ? "yes" : "NO");
    table.end();
    out.printf("orders lease epochs (fencing tokens): paused owner %d, after takeover %d%n", r.pausedEpoch(),
        r.takeoverEpoch());
    if (!r.differenceSamples().isEmpty()) {
      out.println("differences: " + r.differenceSamples().stream().collect(Collectors.joining(", ")));
    }
    out.println(r.ok() ? "RESULT: OK" : "RESULT: FAILED");
  }
}
