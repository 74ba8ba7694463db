package dev.sluice.demo;

import static com.mongodb.client.model.Updates.combine;
import static com.mongodb.client.model.Updates.max;
import static com.mongodb.client.model.Updates.set;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Listener;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bson.BsonDocument;
import org.bson.Document;

/**
 * One listener instance of the demo, run in its own JVM so the demo can really pause it (SIGSTOP).
 * Its handler records every delivery and keeps a per-customer view with a fenced write.
 *
 * <p>Standard input is a command channel: {@code arm} makes the next handler call print
 * {@code IN-HANDLER ...} and wait for {@code go}, so the demo can freeze the process at a known
 * point inside the handler, before its fenced write (the seed's figure 3).
 */
public final class DemoNode {
  /** The per-customer view the handler writes with the fence. */
  static final String VIEW = "customer_view";

  private DemoNode() {}

  public static void main(String[] args) throws Exception {
    String mongo = args[0];
    String name = args[1];
    Duration lease = Duration.ofMillis(Long.parseLong(args[2]));
    int checkpointEvery = Integer.parseInt(args[3]);

    AtomicBoolean armed = new AtomicBoolean();
    CountDownLatch go = new CountDownLatch(1);
    Thread commands = new Thread(() -> readCommands(armed, go), "demo-commands");
    commands.setDaemon(true);
    commands.start();

    MongoClient client = MongoClients.create(mongo);
    MongoCollection<Document> deliveries = client.getDatabase(Demo.DATABASE).getCollection("deliveries");
    MongoCollection<Document> view = client.getDatabase(Demo.DATABASE).getCollection(VIEW);

    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(client, Demo.DATABASE, "orders").build(),
            MongoLeaseStore.builder(client.getDatabase(Demo.DATABASE)).build()).group("demo")
        .owner(name)
        .leaseDuration(lease)
        .renewInterval(lease.dividedBy(3))
        .acquireInterval(Duration.ofMillis(200))
        .checkpoint(CheckpointPolicy.every(checkpointEvery, Duration.ofMillis(200)))
        .handler((change, fence) -> handle(change, fence, name, deliveries, view, armed, go))
        .observer(new LeaseLines(name))
        .build();
    Runtime.getRuntime().addShutdownHook(new Thread(listener::close));
    listener.start();
    System.out.println("READY " + name);
    Thread.currentThread().join(); // runs until the demo kills it
  }

  private static void handle(ChangeEvent<BsonDocument> change, Fence fence, String name,
      MongoCollection<Document> deliveries, MongoCollection<Document> view,
      AtomicBoolean armed, CountDownLatch go) throws InterruptedException {
    BsonDocument order = change.document();
    if (order == null) {
      return; // a delete or a change without a full document: not part of this demo's writes
    }
    int changeNo = order.getInt32("changeNo").getValue();
    String customer = order.getString("customer").getValue();
    deliveries.insertOne(new Document("changeNo", changeNo).append("node", name).append("epoch", fence.epoch()));
    if (armed.compareAndSet(true, false)) {
      System.out.println("IN-HANDLER " + name + " changeNo=" + changeNo + " epoch=" + fence.epoch());
      go.await(); // the demo pauses this process here with SIGSTOP
    }
    try {
      // Fenced write: applies only if the view holds nothing from a newer epoch.
      FencedWrites.updateOne(view, customer,
          combine(set("lastChangeNo", changeNo), max("maxChangeNo", changeNo)), fence);
    } catch (StaleFenceException e) {
      System.out.println("STALE-WRITE-REJECTED " + name + " changeNo=" + changeNo + " epoch=" + fence.epoch());
      throw e;
    }
  }

  private static void readCommands(AtomicBoolean armed, CountDownLatch go) {
    try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      String line;
      while ((line = in.readLine()) != null) {
        switch (line.trim()) {
          case "arm" -> armed.set(true);
          case "go" -> go.countDown();
          default -> System.out.println("UNKNOWN-COMMAND " + line);
        }
      }
    } catch (Exception e) {
      System.out.println("COMMANDS-CLOSED " + e);
    }
  }
}
