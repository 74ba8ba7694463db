package dev.sluice.mongodb.feed;

import com.mongodb.client.ClientSession;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.DeleteOneModel;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ReplaceOneModel;
import com.mongodb.client.model.ReplaceOptions;
import com.mongodb.client.model.WriteModel;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.feed.ChangeFeedContract.Source;
import dev.sluice.testkit.feed.ChangeFeedContract.Write;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.BsonString;
import org.bson.BsonTimestamp;

/**
 * A fresh collection per use, for the feed and listener contracts: a unit of several writes is a
 * transaction (on the embedded server too, which logs it as one {@code applyOps} entry as a real
 * one does, ADR 0087), else one ordered bulk write; history is cut by trimming the oplog of an
 * embedded server of the caller's own.
 */
final class MongoTestSource implements Source<BsonDocument> {
  private static final String DB = "contract" + UUID.randomUUID().toString().substring(0, 8);
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();

  private final MongoClient client;
  private final boolean transactions;
  private final EmbeddedMongo own;
  private final MongoCollection<BsonDocument> collection;
  private final MongoChangeFeed feed;

  MongoTestSource(MongoClient client, boolean transactions, EmbeddedMongo own) {
    this.client = client;
    this.transactions = transactions;
    this.own = own;
    String name = "c" + COLLECTIONS.incrementAndGet();
    this.collection = client.getDatabase(DB).getCollection(name, BsonDocument.class);
    // Chunks of 2: resuming a snapshot is tried inside chunks and across their ends.
    this.feed = MongoChangeFeed.builder(client, DB, name).batchSize(50).snapshotChunkSize(2).build();
  }

  @Override
  public ChangeFeed<BsonDocument> feed() {
    return feed;
  }

  @Override
  public void write(List<Write> writes) {
    List<WriteModel<BsonDocument>> models = new ArrayList<>();
    for (Write w : writes) {
      if (w.version() == null) {
        models.add(new DeleteOneModel<>(Filters.eq("_id", w.key())));
      } else {
        models.add(new ReplaceOneModel<>(Filters.eq("_id", w.key()),
            new BsonDocument("_id", new BsonString(w.key())).append("version", new BsonInt64(w.version())),
            new ReplaceOptions().upsert(true)));
      }
    }
    if (transactions && writes.size() > 1) {
      try (ClientSession session = client.startSession()) {
        session.withTransaction(() -> collection.bulkWrite(session, models));
      }
    } else {
      collection.bulkWrite(models);
    }
  }

  @Override
  public Long version(ChangeEvent<BsonDocument> change) {
    BsonDocument d = change.document();
    return d == null || !d.containsKey("version") ? null : d.getNumber("version").longValue();
  }

  @Override
  public void forgetThrough(ChangeEvent<BsonDocument> change) {
    if (own == null) {
      throw new IllegalStateException("history can only be cut on an embedded server of the test's own");
    }
    BsonTimestamp at = ((BsonDocument) change.raw()).getTimestamp("clusterTime");
    own.trimOplogBefore(new BsonTimestamp(at.getTime(), at.getInc() + 1));
  }

  @Override
  public LeaseStore leaseStore() {
    return MongoLeaseStore.builder(client.getDatabase(DB)).build();
  }

  @Override
  public void close() {
    if (own != null) {
      client.close();
      own.close();
    }
  }
}
