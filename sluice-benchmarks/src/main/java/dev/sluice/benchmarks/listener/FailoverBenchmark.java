package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bson.Document;

/**
 * Failover time after SIGKILL of the owner, with the default settings: the time from the kill to
 * the standby JVM delivering a change written right after the kill. Runs {@code runs} times (default
 * 10), each on a fresh collection, and prints median and max.
 */
public final class FailoverBenchmark {
  private FailoverBenchmark() {}

  public static void main(String[] args) throws Exception {
    int runs = args.length > 0 ? Integer.parseInt(args[0]) : 10;
    List<Long> millis = new ArrayList<>();
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      for (int run = 0; run < runs; run++) {
        String collection = "failover" + run;
        MongoCollection<Document> docs = client.getDatabase("bench").getCollection(collection);
        // The standby starts only once the owner holds the lease, so the roles are certain.
        try (ChildJvm owner = ChildJvm.start("owner", StandbyNode.class, mongo.connectionString(), "bench", collection, "owner-" + run)) {
          owner.awaitLineStartingWith("ACQUIRED", Duration.ofSeconds(60));
          ChildJvm standby = ChildJvm.start("standby", StandbyNode.class, mongo.connectionString(), "bench", collection, "standby-" + run);
          try (standby) {
            standby.awaitLineStartingWith("READY", Duration.ofSeconds(60));
            docs.insertOne(new Document("n", 0));
            owner.awaitLineStartingWith("DELIVERED 0", Duration.ofSeconds(30));
            long killed = System.nanoTime();
            owner.kill();
            docs.insertOne(new Document("n", 1));
            standby.awaitLineStartingWith("DELIVERED 1", Duration.ofSeconds(60));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - killed);
            millis.add(ms);
            System.out.printf("run %2d: failover %5d ms%n", run + 1, ms);
          }
        }
      }
    }
    List<Long> sorted = millis.stream().sorted().toList();
    long median = sorted.size() % 2 == 1 ? sorted.get(sorted.size() / 2)
        : (sorted.get(sorted.size() / 2 - 1) + sorted.get(sorted.size() / 2)) / 2;
    System.out.printf("failover after SIGKILL over %d runs (lease 10 s, renew/acquire 3.33 s): median %d ms, max %d ms, min %d ms%n",
        runs, median, sorted.get(sorted.size() - 1), sorted.get(0));
  }
}
