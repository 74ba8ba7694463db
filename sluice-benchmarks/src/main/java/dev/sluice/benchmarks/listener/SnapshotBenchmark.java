package dev.sluice.benchmarks.listener;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoCursor;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.InsertManyOptions;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.Updates;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.HistoryLostPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.Document;

/**
 * The MongoDB snapshot bootstrap (issue 14) on the embedded server: documents per second of a
 * snapshot read through the feed (chunks of 1,000 and of 10,000, each chunk between watermarks)
 * against a plain {@code find()} scan of the same collection in the same round, and against the
 * same chunked, {@code _id}-ordered reads without watermarks or stream; and the time a
 * listener with {@code HistoryLostPolicy.RESNAPSHOT} takes to converge after its history was lost,
 * from its start until a sink equals the collection.
 *
 * <p>Arguments: documents (default 200,000), rounds (default 1).
 */
public final class SnapshotBenchmark {
  private SnapshotBenchmark() {}

  public static void main(String[] args) throws Exception {
    int documents = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
    int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    for (int r = 1; r <= rounds; r++) {
      try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
        MongoCollection<Document> docs = client.getDatabase("bench").getCollection("docs");
        insert(docs, documents);
        double scan = scan(docs, documents);
        for (int chunk : new int[] {1_000, 10_000}) {
          double keyset = keysetScan(docs, documents, chunk);
          double snapshot = snapshot(client, documents, chunk);
          System.out.printf("round %d, %,d documents, chunks of %,d: find() scan %,.0f docs/s; the same reads as"
              + " the snapshot without watermarks (_id-ordered, a chunk each) %,.0f docs/s; snapshot %,.0f docs/s;"
              + " snapshot/find() %.3f, snapshot/chunked reads %.3f%n", r, documents, chunk, scan, keyset, snapshot,
              snapshot / scan, snapshot / keyset);
        }
        System.out.printf("round %d: converged after forced history loss in %.1f s (RESNAPSHOT, %,d documents)%n", r,
            converge(mongo, client, docs, documents) / 1e3, documents);
      }
    }
  }

  private static void insert(MongoCollection<Document> docs, int documents) {
    List<Document> batch = new ArrayList<>();
    for (int i = 0; i < documents; i++) {
      batch.add(new Document("_id", i).append("version", 1L).append("payload", "x".repeat(100)));
      if (batch.size() == 10_000 || i == documents - 1) {
        docs.insertMany(batch, new InsertManyOptions().ordered(false));
        batch.clear();
      }
    }
  }

  /** The baseline: every document through one plain cursor. */
  private static double scan(MongoCollection<Document> docs, int documents) {
    long start = System.nanoTime();
    int seen = 0;
    try (MongoCursor<Document> c = docs.find().batchSize(1_000).cursor()) {
      while (c.hasNext()) {
        c.next();
        seen++;
      }
    }
    check(seen, documents);
    return seen / ((System.nanoTime() - start) / 1e9);
  }

  /**
   * The second baseline: the snapshot's reads alone, {@code _id} after the last one, sorted, a
   * chunk at a time (this server has no range scans of its {@code _id} index, so each read scans
   * and sorts the rest of the collection; a real server walks the index).
   */
  private static double keysetScan(MongoCollection<Document> docs, int documents, int chunk) {
    long start = System.nanoTime();
    int seen = 0;
    Object after = null;
    while (true) {
      List<Document> read = new ArrayList<>(chunk);
      docs.find(after == null ? new Document() : new Document("_id", new Document("$gt", after)))
          .sort(new Document("_id", 1)).limit(chunk).batchSize(chunk).into(read);
      seen += read.size();
      if (read.size() < chunk) {
        break;
      }
      after = read.get(read.size() - 1).get("_id");
    }
    check(seen, documents);
    return seen / ((System.nanoTime() - start) / 1e9);
  }

  private static double snapshot(MongoClient client, int documents, int chunk) {
    MongoChangeFeed feed = MongoChangeFeed.builder(client, "bench", "docs").snapshotChunkSize(chunk).build();
    long start = System.nanoTime();
    int seen = 0;
    try (FeedCursor<BsonDocument> c = feed.open(PartitionSpec.single(), StartPoint.snapshot())) {
      while (seen < documents) {
        for (ChangeEvent<BsonDocument> e : c.poll(Duration.ofMillis(100))) {
          seen += e.operation() == Operation.SNAPSHOT ? 1 : 0;
        }
      }
    }
    check(seen, documents);
    return seen / ((System.nanoTime() - start) / 1e9);
  }

  /**
   * A listener that read everything stops; 1% of the documents (every 100th) change, 1,000 are
   * added at the end, and the oplog is cut past its checkpoint; restarted with RESNAPSHOT, how long
   * until its sink equals the collection.
   */
  private static long converge(EmbeddedMongo mongo, MongoClient client, MongoCollection<Document> docs, int documents)
      throws InterruptedException {
    Map<String, Long> sink = new ConcurrentHashMap<>();
    try (Listener<BsonDocument> first = listener(client, sink, BootstrapPolicy.latest())) {
      while (first.status().stream().anyMatch(p -> p.state() != PartitionState.ACTIVE || p.committed() == null)) {
        Thread.sleep(20); // a benchmark's own polling; tests use Awaitility
      }
    }
    docs.find().forEach(d -> sink.put(Integer.toString(d.getInteger("_id")), d.getLong("version"))); // what it held
    // Spread over the whole collection, and new documents at its end: only a complete re-read
    // brings the sink level with it.
    docs.updateMany(Filters.mod("_id", 100, 0), Updates.set("version", 2L));
    List<Document> added = new ArrayList<>();
    for (int i = documents; i < documents + 1_000; i++) {
      added.add(new Document("_id", i).append("version", 1L).append("payload", "x".repeat(100)));
    }
    docs.insertMany(added);
    client.getDatabase("bench").getCollection("marker").insertOne(new Document("_id", 1));
    BsonTimestamp newest = client.getDatabase("local").getCollection("oplog.rs", BsonDocument.class)
        .find().sort(Sorts.descending("$natural")).first().getTimestamp("ts");
    mongo.trimOplogBefore(newest);
    Map<String, Long> expected = new HashMap<>();
    docs.find().forEach(d -> expected.put(Integer.toString(d.getInteger("_id")), d.getLong("version")));

    long start = System.nanoTime();
    try (Listener<BsonDocument> second = listener(client, sink, BootstrapPolicy.latest())) {
      while (!sink.equals(expected)) {
        Thread.sleep(50);
        if (System.nanoTime() - start > Duration.ofMinutes(30).toNanos()) {
          throw new IllegalStateException("did not converge in 30 minutes: " + second.status());
        }
      }
      return (System.nanoTime() - start) / 1_000_000;
    }
  }

  private static Listener<BsonDocument> listener(MongoClient client, Map<String, Long> sink, BootstrapPolicy bootstrap) {
    return Listener.builder(MongoChangeFeed.builder(client, "bench", "docs").build(),
            MongoLeaseStore.builder(client.getDatabase("bench")).build()).group("converge")
        .bootstrap(bootstrap)
        .onHistoryLost(HistoryLostPolicy.RESNAPSHOT)
        .handler((change, fence) -> {
          if (change.operation() == Operation.DELETE) {
            sink.remove(change.key());
          } else if (change.document() != null) {
            sink.put(change.key(), change.document().getInt64("version").getValue());
          }
        })
        .build().start();
  }

  private static void check(int seen, int documents) {
    if (seen != documents) {
      throw new IllegalStateException("read " + seen + " documents of " + documents);
    }
  }
}
