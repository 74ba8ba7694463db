package dev.sluice.mongodb.lock;

import com.mongodb.ErrorCategory;
import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import com.mongodb.client.result.UpdateResult;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.lock.LockTestBackend;
import org.bson.Document;

/**
 * The MongoDB backend of the multi-JVM lock tests: argument = connection string. The fenced
 * target is a document upserted with filter {@code {_id, fence: {$lt: token}}}: a stale token
 * matches nothing and its upsert collides on {@code _id} (E11000), i.e. is rejected.
 */
public final class MongoLockTestBackend implements LockTestBackend {
  private MongoClient client;
  private MongoLeaseStore store;
  private MongoCollection<Document> resources;

  public MongoLockTestBackend() {}

  @Override
  public LockTestBackend open(String connectionString) {
    client = MongoClients.create(connectionString);
    store = MongoLeaseStore.builder(client.getDatabase("locks")).collection("lock_fuzz").build();
    resources = client.getDatabase("locks").getCollection("fenced_resource");
    return this;
  }

  @Override
  public LeaseStore leaseStore() {
    return store;
  }

  @Override
  public boolean fencedWrite(String resource, long token, String value) {
    try {
      UpdateResult r = resources.updateOne(
          Filters.and(Filters.eq("_id", resource), Filters.lt("fence", token)),
          Updates.combine(Updates.set("fence", token), Updates.set("val", value)),
          new UpdateOptions().upsert(true));
      return r.getMatchedCount() == 1 || r.getUpsertedId() != null;
    } catch (MongoWriteException e) {
      if (e.getError().getCategory() == ErrorCategory.DUPLICATE_KEY) {
        return false;
      }
      throw e;
    }
  }

  @Override
  public String read(String resource) {
    Document d = resources.find(Filters.eq("_id", resource)).first();
    return d == null ? null : d.getLong("fence") + "=" + d.getString("val");
  }

  @Override
  public void close() {
    if (client != null) {
      client.close();
    }
  }
}
