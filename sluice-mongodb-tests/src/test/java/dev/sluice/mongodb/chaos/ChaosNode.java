package dev.sluice.mongodb.chaos;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Updates;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.lease.Lease;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.fence.FencedWrites;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.Document;

/**
 * One member of the chaos cluster, in its own JVM so that the harness can SIGKILL and SIGSTOP it:
 * a {@link Listener} of group {@value ChaosHarness#GROUP} with {@value ChaosHarness#PARTITIONS}
 * partitions on the writer's {@value ChaosHarness#SOURCE} collection.
 *
 * <p>Its handler applies each written change {@code (key, seq)} to the key's ground-truth
 * document in {@value ChaosHarness#TRUTH} with one {@link FencedWrites#updateOne fenced write}
 * (epoch fence of the change's lease, ADR 0013) that, atomically with the fence check, sets
 * {@code seq}, raises {@code high} (the highest applied sequence number) and appends the entry
 * {@code {s: seq, e: epoch, n: node, t: wall-clock millis}} to the document's {@code log} array.
 * Why the applied log lives inside the fenced document and not in a collection of its own is
 * explained in {@link ChaosHarness}. A write rejected by the fence throws {@code
 * StaleFenceException} out of the handler, as a real handler's would.
 *
 * <p>Its observer records acquisitions, losses, feed re-opens and handler failures in {@value
 * ChaosHarness#EVENTS} (the harness counts takeovers and re-reads from them) and prints {@code
 * READY}/{@code ACQUIRED}/{@code LOST} lines for people reading a failed run.
 *
 * <p>Each change is begun under the eye of a {@link DeadlineWatch} wrapped around its lease store:
 * a change begun at or after the local deadline of its lease prints a {@code LATE} line, and a
 * {@code DEADLINES} line every two seconds sums up (docs/adr/0108).
 *
 * <p>Arguments: the connection strings of its lease store, its source and its sink (each through
 * its own fault proxy of the harness, with {@code directConnection=true}) and of the bookkeeping
 * (the events, straight to the server), then database, node name, lease milliseconds, checkpoint
 * batch.
 * The node exits when its standard input closes, so that a harness that dies leaves no orphans.
 */
public final class ChaosNode {
  private ChaosNode() {}

  public static void main(String[] args) throws Exception {
    if (args.length != 8) {
      throw new IllegalArgumentException("usage: ChaosNode <lease store connection string> <source connection string>"
          + " <sink connection string> <bookkeeping connection string> <database> <node name> <lease millis>"
          + " <checkpoint batch>, but got " + args.length + " argument(s)");
    }
    String database = args[4];
    String name = args[5];
    Duration lease = Duration.ofMillis(Long.parseLong(args[6]));
    int batch = Integer.parseInt(args[7]);
    exitWhenParentGoes();

    MongoClient storeClient = client(args[0]);
    MongoClient sourceClient = client(args[1]);
    MongoClient sinkClient = client(args[2]);
    MongoClient bookkeeping = client(args[3]);
    MongoCollection<Document> truth = sinkClient.getDatabase(database).getCollection(ChaosHarness.TRUTH);
    MongoCollection<Document> events = bookkeeping.getDatabase(database).getCollection(ChaosHarness.EVENTS);
    DeadlineWatch store = new DeadlineWatch(MongoLeaseStore.builder(storeClient.getDatabase(database)).build());
    Deadlines deadlines = new Deadlines(store, name);

    Listener<BsonDocument> listener = Listener.builder(
            MongoChangeFeed.builder(sourceClient, database, ChaosHarness.SOURCE).batchSize(100).build(), store)
        .group(ChaosHarness.GROUP)
        .owner(name)
        .partitions(ChaosHarness.PARTITIONS)
        .leaseDuration(lease)
        .renewInterval(lease.dividedBy(4))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .checkpoint(CheckpointPolicy.every(batch, Duration.ofMillis(500)))
        .handler((change, fence) -> {
          deadlines.handling(change, fence);
          apply(truth, name, change, fence);
        })
        .observer(new Recorder(events, name))
        .build();
    listener.start();
    System.out.println("READY " + name + " " + listener.owner());
    // For reading a stall afterwards: every 2 s, what each partition this member holds has done.
    Thread sampler = new Thread(() -> {
      while (true) {
        StringBuilder line = new StringBuilder("STATUS ").append(java.time.LocalTime.now());
        for (PartitionStatus st : listener.status()) {
          if (st.state() != PartitionState.ACQUIRING) {
            line.append(' ').append(st.lease().substring(st.lease().lastIndexOf('#'))).append('=')
                .append(st.state()).append("/processed=").append(st.processed()).append("/lag=")
                .append(st.lag() == null ? "-" : st.lag().toMillis() + "ms");
          }
        }
        System.out.println(line);
        System.out.println(deadlines.summary());
        try {
          Thread.sleep(2_000); // a sampling period, not a synchronisation
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "status-sampler");
    sampler.setDaemon(true);
    sampler.start();
    Thread.currentThread().join();
  }

  /**
   * A client of one connection role. Each role's connection string names the member's own fault
   * proxy with {@code directConnection=true} (the driver would otherwise discover the replica set's
   * members and go round the proxy); the timeouts are the ones the member always had.
   */
  private static MongoClient client(String connectionString) {
    return MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(connectionString))
        .applyToClusterSettings(b -> b.serverSelectionTimeout(10, TimeUnit.SECONDS))
        .applyToSocketSettings(b -> b.connectTimeout(5, TimeUnit.SECONDS).readTimeout(15, TimeUnit.SECONDS))
        .build());
  }

  /**
   * How close to its local lease deadline each change was begun: a change begun at or after the
   * deadline of the lease it is handled under prints a {@code LATE} line (wall-clock millis of the
   * start and of the deadline, and by how much), and every two seconds a {@code DEADLINES} line
   * gives the count of changes begun, of those whose lease this watch never saw granted (must stay
   * 0: the check would be blind to them), of late ones, and the least time left at a start.
   */
  static final class Deadlines {
    private final DeadlineWatch watch;
    private final String node;
    private final java.util.concurrent.atomic.AtomicLong begun = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong unknown = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong late = new java.util.concurrent.atomic.AtomicLong();
    private final java.util.concurrent.atomic.AtomicLong leastLeftMicros = new java.util.concurrent.atomic.AtomicLong(Long.MAX_VALUE);

    Deadlines(DeadlineWatch watch, String node) {
      this.watch = watch;
      this.node = node;
    }

    void handling(ChangeEvent<BsonDocument> change, Fence fence) {
      long now = System.nanoTime();
      long wall = System.currentTimeMillis();
      begun.incrementAndGet();
      Long deadline = watch.deadline(fence.lease(), fence.epoch());
      if (deadline == null) {
        unknown.incrementAndGet();
        System.out.println("NO-DEADLINE " + node + " " + fence.lease() + " epoch=" + fence.epoch());
        return;
      }
      long left = deadline - now;
      leastLeftMicros.accumulateAndGet(left / 1_000, Math::min);
      if (left <= 0) {
        late.incrementAndGet();
        System.out.println("LATE " + node + " " + fence.lease() + " epoch=" + fence.epoch() + " key=" + change.key()
            + " at=" + wall + " deadline=" + (wall + left / 1_000_000) + " pastMicros=" + (-left / 1_000));
      }
    }

    String summary() {
      long least = leastLeftMicros.get();
      return "DEADLINES " + node + " begun=" + begun.get() + " unknown=" + unknown.get() + " late=" + late.get()
          + " leastLeftMicros=" + (least == Long.MAX_VALUE ? "-" : Long.toString(least));
    }
  }

  /** The writer deletes a key's document and inserts it again with the next seq: apply the inserts. */
  static void apply(MongoCollection<Document> truth, String node, ChangeEvent<BsonDocument> change, Fence fence) {
    if (change.operation() != Operation.INSERT) {
      return; // the delete that precedes each insert carries no seq
    }
    BsonDocument d = change.document();
    if (d == null || !d.isInt64(ChaosWriter.SEQ)) {
      throw new IllegalStateException("change of key " + change.key() + " has no long '" + ChaosWriter.SEQ
          + "' in its document: " + d);
    }
    long seq = d.getInt64(ChaosWriter.SEQ).getValue();
    Document entry = new Document("s", seq).append("e", fence.epoch()).append("n", node)
        .append("t", System.currentTimeMillis());
    FencedWrites.updateOne(truth, change.key(),
        Updates.combine(Updates.set("seq", seq), Updates.max("high", seq), Updates.push("log", entry)), fence);
  }

  private static void exitWhenParentGoes() {
    Thread t = new Thread(() -> {
      InputStream in = System.in;
      try {
        while (in.read() >= 0) {
          // lines from the harness are not used; only the end of the stream matters
        }
      } catch (IOException ignored) {
        // treated like the end of the stream
      }
      Runtime.getRuntime().halt(3);
    }, "parent-watch");
    t.setDaemon(true);
    t.start();
  }

  /** Records what the harness needs to bound duplicates; must not throw. */
  private static final class Recorder implements ListenerObserver {
    private final MongoCollection<Document> events;
    private final String node;

    Recorder(MongoCollection<Document> events, String node) {
      this.events = events;
      this.node = node;
    }

    private void record(String type, String lease, long epoch, String detail) {
      System.out.println(type.toUpperCase(java.util.Locale.ROOT) + " " + java.time.LocalTime.now() + " " + node + " "
          + lease + " epoch=" + epoch
          + (detail == null ? "" : " " + detail));
      try {
        events.insertOne(new Document("node", node).append("type", type).append("lease", lease)
            .append("epoch", epoch).append("detail", detail).append("t", System.currentTimeMillis()));
      } catch (RuntimeException e) {
        System.out.println("EVENT-NOT-RECORDED " + type + " " + lease + ": " + e);
      }
    }

    @Override
    public void acquired(Lease lease) {
      record("acquired", lease.name(), lease.epoch(), null);
    }

    @Override
    public void stateChanged(String lease, PartitionState from, PartitionState to) {
      record("state", lease, -1, from + " -> " + to);
    }

    @Override
    public void lost(String lease, long epoch, String reason) {
      record("lost", lease, epoch, reason);
    }

    @Override
    public void feedFailed(String lease, Throwable error) {
      record("feedFailed", lease, -1, String.valueOf(error));
    }

    @Override
    public void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {
      record("handlerFailed", event.stream() + "/" + event.key(), -1, String.valueOf(error));
    }
  }
}
