package dev.sluice.mongodb.view;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ReplaceOptions;
import java.util.Random;
import org.bson.BsonDocument;

/**
 * Random writes to orders and customers as an application would make them: inserts, updates,
 * re-keying of orders to another (possibly not yet existing) customer, deletes; every write of a
 * document raises its version, also across delete and re-insert.
 */
final class SourceWriter {
  private final MongoCollection<BsonDocument> orders;
  private final MongoCollection<BsonDocument> customers;
  private final Random random;
  private final int[] orderVersions;
  private final int[] customerVersions;
  private int writes;

  SourceWriter(MongoDatabase db, long seed, int orderIds, int customerIds) {
    this.orders = db.getCollection("orders", BsonDocument.class);
    this.customers = db.getCollection("customers", BsonDocument.class);
    this.random = new Random(seed);
    this.orderVersions = new int[orderIds];
    this.customerVersions = new int[customerIds];
  }

  /** Makes {@code n} writes; returns how many changed a document. */
  int write(int n) {
    int changed = 0;
    for (int i = 0; i < n; i++) {
      changed += writeOne() ? 1 : 0;
    }
    return changed;
  }

  private boolean writeOne() {
    writes++;
    boolean order = random.nextInt(3) > 0;
    int k = random.nextInt(order ? orderVersions.length : customerVersions.length);
    String id = (order ? "o" : "c") + k;
    MongoCollection<BsonDocument> coll = order ? orders : customers;
    if (random.nextInt(8) == 0) {
      return coll.deleteOne(Filters.eq("_id", id)).getDeletedCount() == 1;
    }
    int version = order ? ++orderVersions[k] : ++customerVersions[k];
    BsonDocument doc =
        order
            ? OrdersModel.order(
                id, "c" + random.nextInt(customerVersions.length + 1), random.nextInt(100), version)
            : OrdersModel.customer(id, "name" + writes, writes % 2 == 0 ? "gold" : "silver", version);
    coll.replaceOne(Filters.eq("_id", id), doc, new ReplaceOptions().upsert(true));
    return true;
  }
}
