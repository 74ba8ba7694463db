package dev.sluice.sample;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.spring.boot.actuate.SluiceEndpoint;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import org.bson.Document;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.boot.actuate.health.HealthEndpoint;
import org.springframework.stereotype.Component;

/**
 * Writes orders once the listeners run, waits until both handled them, prints what the health
 * indicator and the {@code sluice} endpoint say; with {@code sample.keep-running} it goes on writing
 * an order a second on a thread of its own until the application stops.
 */
@Component
public class OrderWriter implements ApplicationRunner {
  private final MongoCollection<Document> orders;
  private final OrderTotals totals;
  private final OrderAudit audit;
  private final HealthEndpoint health;
  private final SluiceEndpoint sluice;
  private final int count;
  private final boolean keepRunning;

  public OrderWriter(MongoClient client, @Value("${spring.data.mongodb.database:shop}") String database,
      OrderTotals totals, OrderAudit audit, HealthEndpoint health, SluiceEndpoint sluice,
      @Value("${sample.orders:10}") int count, @Value("${sample.keep-running:false}") boolean keepRunning) {
    this.orders = client.getDatabase(database).getCollection("orders");
    this.totals = totals;
    this.audit = audit;
    this.health = health;
    this.sluice = sluice;
    this.count = count;
    this.keepRunning = keepRunning;
  }

  @Override
  public void run(ApplicationArguments args) throws Exception {
    long first = orders.countDocuments();
    for (long i = first; i < first + count; i++) {
      orders.insertOne(new Document("_id", "order-" + i).append("amount", 10 * (i + 1)));
    }
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (totals.handled() < first + count || audit.seen() < first + count) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the listeners did not handle " + count + " orders within 60 s: "
            + totals.handled() + " counted, " + audit.seen() + " audited");
      }
      LockSupport.parkNanos(Duration.ofMillis(50).toNanos()); // polling a counter the handlers update
    }
    ObjectMapper json = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    System.out.println("\n" + totals.handled() + " orders handled, total " + totals.total() + "; audited "
        + audit.seen());
    System.out.println("\nGET /actuator/health/sluice\n" + json.writeValueAsString(health.healthForPath("sluice")));
    System.out.println("\nGET /actuator/sluice\n" + json.writeValueAsString(sluice.status()));
    if (keepRunning) {
      Thread writer = new Thread(() -> {
        for (long i = first + count; !Thread.currentThread().isInterrupted(); i++) {
          orders.insertOne(new Document("_id", "order-" + i).append("amount", 10 * (i + 1)));
          LockSupport.parkNanos(Duration.ofSeconds(1).toNanos()); // the pace of the sample's orders
        }
      }, "sample-order-writer");
      writer.start();
      System.out.println("\nWriting an order a second; Ctrl-C stops (the listeners commit and release their leases).");
    }
  }
}
