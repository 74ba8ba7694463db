package dev.sluice.benchmarks;

import com.mongodb.client.MongoCollection;
import java.util.ArrayList;
import java.util.List;
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
}
