package dev.sluice.benchmarks;

import com.mongodb.client.MongoChangeStreamCursor;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.changestream.ChangeStreamDocument;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonTimestamp;
import org.bson.Document;

/** The benchmarks' usual backlog: inserts written before the clock starts. */
public final class Prewrite {
  private Prewrite() {}

  /**
   * Inserts {@code {_id: i, n: i, payload: 100 × "x"}} for i in 0..changes-1 into {@code docs},
   * in ordered batches of 1,000.
   */
  public static void inserts(MongoCollection<Document> docs, int changes) {
    List<Document> batch = new ArrayList<>();
    for (int i = 0; i < changes; i++) {
      batch.add(new Document("_id", i).append("n", i).append("payload", "x".repeat(100)));
      if (batch.size() == 1000) {
        docs.insertMany(batch);
        batch.clear();
      }
    }
    if (!batch.isEmpty()) {
      docs.insertMany(batch);
    }
  }

  /**
   * The baseline: {@code changes} {@link #inserts} into {@code bench.<collection>} of a fresh embedded server, read
   * back from the change stream by the bare driver without any processing; changes per second.
   */
  public static double drainRate(String collection, int changes) {
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
      inserts(client.getDatabase("bench").getCollection(collection), changes);
      long start = System.nanoTime();
      int seen = 0;
      try (MongoChangeStreamCursor<ChangeStreamDocument<Document>> cursor = client.getDatabase("bench")
          .getCollection(collection).watch().fullDocument(FullDocument.UPDATE_LOOKUP)
          .startAtOperationTime(new BsonTimestamp(0, 0)).batchSize(500).cursor()) {
        while (seen < changes) {
          if (cursor.tryNext() != null) {
            seen++;
          }
        }
      }
      return changes / ((System.nanoTime() - start) / 1e9);
    }
  }
}
