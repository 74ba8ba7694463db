package dev.sluice.app.readme;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.Document;

public class TryIt {
  public static void main(String[] args) throws Exception {
    CountDownLatch arrived = new CountDownLatch(3);
    try (EmbeddedMongo mongo = EmbeddedMongo.start();   // an in-JVM MongoDB from sluice-testkit
         MongoClient client = mongo.client()) {
      LeaseStore leases = MongoLeaseStore.builder(client.getDatabase("shop")).build();
      MongoChangeFeed orders = MongoChangeFeed.builder(client, "shop", "orders").build();

      try (Listener<BsonDocument> listener = Listener.builder(orders, leases)
              .group("try-it")
              .handler((change, fence) -> {
                System.out.println(change.operation() + " " + change.document().toJson()
                    + " (lease " + fence.lease() + ", epoch " + fence.epoch() + ")");
                arrived.countDown();
              })
              .build().start()) {
        MongoCollection<Document> collection = client.getDatabase("shop").getCollection("orders");
        for (int i = 1; i <= 3; i++) {
          collection.insertOne(new Document("_id", "order-" + i).append("amount", 10 * i));
        }
        if (!arrived.await(30, TimeUnit.SECONDS)) {
          throw new IllegalStateException("the changes did not arrive within 30 s");
        }
        System.out.println("all changes arrived");
      }   // close(): commits the checkpoint and releases the lease
    }
  }
}
