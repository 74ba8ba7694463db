package dev.sluice.benchmarks.connect;

import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.benchmarks.Prewrite;
import dev.sluice.benchmarks.Rounds;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.common.header.Header;
import org.bson.BsonDocument;
import org.bson.Document;

/**
 * The Kafka Connect source connector ({@code sluice-kafka-connect}) against Sluice's own Kafka
 * relay, in one JVM with one embedded Kafka broker (issue 17).
 *
 * <p><b>Throughput.</b> Each variant reads the same pre-written inserts ({@link Prewrite}) from a
 * fresh embedded MongoDB into a fresh 3-partition topic; the clock stops when a {@code
 * read_committed} consumer of that topic has received the last record. Variants:
 *
 * <ol>
 *   <li>the relay: a listener with {@link KafkaSink} and the default checkpoint policy (baseline);
 *       the clock starts at {@code Listener.start()};
 *   <li>the connector, 1 task on 1 partition, and 4 tasks on 4 partitions, each with exactly-once
 *       source support off (at least once) and on (KIP-618): two Connect groups of one in-process
 *       worker each. The connector publishes the relay's envelope ({@code value.format=envelope},
 *       StringConverter), so both write the same bytes. It is created before the changes are
 *       written (its tasks start at the oldest oplog entry, a marker), paused once its tasks run,
 *       then the changes are written; the clock starts at the REST {@code resume}.
 * </ol>
 *
 * Every round runs every variant in this order; warm-up rounds are not counted; a figure is the
 * median of the in-round ratios to the relay, with their range. Each run is also timed from the first
 * record the consumer received to the last, with the time to the first record apart ({@link
 * Timings}, issue 36 target 2); {@code -Dsluice.bench.variants=0,1,5} runs the relay, the
 * one-task connector at least once and the relay with the checkpoint default before issue 36.
 *
 * <p><b>Resume after a dead worker.</b> A second worker of the same group runs in a child JVM; a
 * connector with 2 tasks on 2 partitions has one task there while a writer streams updates; the
 * child is killed with SIGKILL; the figure is the time from the kill to the first record of the
 * dead worker's partition written by its new task (a record whose {@code sluice-fence-epoch}
 * header is higher than before the kill). Connect's default failure detection (session timeout 10
 * s, heartbeat 3 s); {@code scheduled.rebalance.max.delay.ms} is an argument (Connect's default
 * keeps a departed worker's tasks unassigned for up to 5 minutes, waiting for it to come back).
 *
 * <p>Arguments: changes (default 20,000), warm-up rounds (1), measured rounds (3), kills per mode
 * (3), scheduled.rebalance.max.delay.ms (0). Results: {@code docs/benchmarks.md}.
 */
public final class ConnectSourceBenchmark {
  private ConnectSourceBenchmark() {}

  /** The variants, the baseline first; {@link PostgresConnectSourceBenchmark} runs the same ones. */
  static final String[] NAMES = {
    "Sluice Kafka relay (baseline)",
    "connector, 1 task / 1 partition, at least once",
    "connector, 4 tasks / 4 partitions, at least once",
    "connector, 1 task / 1 partition, exactly once",
    "connector, 4 tasks / 4 partitions, exactly once",
    "Sluice Kafka relay, checkpoint every 100 changes (the default before issue 36)"
  };
  static final int[] TASKS = {0, 1, 4, 1, 4, 0};
  static final boolean[] EXACTLY_ONCE = {false, false, false, true, true, false};
  /** The variants run by default: all but the last (which {@code -Dsluice.bench.variants} can add). */
  static final int ALL = 5;
  /** The relay's checkpoint policy in variant {@code v}: the default, or the default before issue 36. */
  static CheckpointPolicy relayPolicy(int v) {
    return v == 5 ? new CheckpointPolicy(100, Duration.ofSeconds(1)) : CheckpointPolicy.defaults();
  }

  public static void main(String[] args) throws Exception {
    int changes = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
    int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    int kills = args.length > 3 ? Integer.parseInt(args[3]) : 3;
    long rebalanceDelayMs = args.length > 4 ? Long.parseLong(args[4]) : 0;
    System.out.printf("%d cores; changes=%d, %d warm-up + %d measured rounds; %d kills per mode,"
        + " scheduled.rebalance.max.delay.ms=%d%n", Runtime.getRuntime().availableProcessors(), changes, warmup,
        rounds, kills, rebalanceDelayMs);
    int[] selected = Timings.selected(ALL);
    String[] names = Timings.names(NAMES, selected);
    Timings timings = new Timings(names, warmup);
    Rounds result;
    Map<Boolean, List<long[]>> resumes = new HashMap<>();
    try (EmbeddedKafka kafka = EmbeddedKafka.start();
        ConnectWorkers alo = ConnectWorkers.start(kafka.bootstrapServers(), "bench-alo", false, rebalanceDelayMs);
        ConnectWorkers eos = ConnectWorkers.start(kafka.bootstrapServers(), "bench-eos", true, rebalanceDelayMs)) {
      result = Rounds.run(names, warmup, rounds, (r, i) -> {
        int v = selected[i];
        String tag = "r" + r + "v" + v;
        return timings.add(r, i, TASKS[v] == 0 ? relay(kafka, changes, tag, relayPolicy(v))
            : connector(kafka, EXACTLY_ONCE[v] ? eos : alo, TASKS[v], EXACTLY_ONCE[v], changes, tag));
      });
      try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client()) {
        for (int k = 1; k <= kills; k++) {
          for (boolean exactlyOnce : new boolean[] {false, true}) {
            long[] ms = resume(kafka, exactlyOnce ? eos : alo, exactlyOnce, mongo.connectionString(), client,
                (exactlyOnce ? "eos" : "alo") + k);
            System.out.printf("kill %d, %s: tasks reassigned (REST) after %d ms, records again after %d ms%n", k,
                exactlyOnce ? "exactly once" : "at least once", ms[0], ms[1]);
            resumes.computeIfAbsent(exactlyOnce, e -> new ArrayList<>()).add(ms);
          }
        }
      }
    }

    System.out.printf("%nchanges=%d, %d warm-up + %d measured rounds; median of in-round ratios to the relay"
        + " [min-max]%n", changes, warmup, rounds);
    result.printRatiosToBaseline();
    if (selected.length == ALL && selected[ALL - 1] == ALL - 1) {
      result.printRatio("4 tasks / 1 task, at least once", 2, 1);
      result.printRatio("4 tasks / 1 task, exactly once", 4, 3);
      result.printRatio("exactly once / at least once, 1 task", 3, 1);
      result.printRatio("exactly once / at least once, 4 tasks", 4, 2);
    }
    timings.print();
    for (boolean exactlyOnce : new boolean[] {false, true}) {
      List<long[]> runs = resumes.getOrDefault(exactlyOnce, List.of());
      if (runs.isEmpty()) {
        continue;
      }
      double[] reassigned = runs.stream().mapToDouble(m -> m[0]).sorted().toArray();
      double[] again = runs.stream().mapToDouble(m -> m[1]).sorted().toArray();
      System.out.printf("| resume after SIGKILL, %s | %d | reassigned %.0f ms [%.0f-%.0f] | records again %.0f ms"
          + " [%.0f-%.0f] |%n", exactlyOnce ? "exactly once" : "at least once", runs.size(), Rounds.median(reassigned),
          reassigned[0], reassigned[reassigned.length - 1], Rounds.median(again), again[0], again[again.length - 1]);
    }
  }

  private static Map<String, String> connectorConfig(String mongoUri, String collection, String prefix,
      int partitions, int tasks, boolean exactlyOnce) {
    Map<String, String> c = ConnectWorkers.connectorBase(prefix, partitions, tasks, exactlyOnce);
    c.put("mongodb.connection.string", mongoUri);
    c.put("mongodb.database", "bench");
    c.put("mongodb.collections", collection);
    return c;
  }

  /** The relay's run, from {@code Listener.start()} to the last record received. */
  private static Timings.Run relay(EmbeddedKafka kafka, int changes, String tag, CheckpointPolicy policy) throws Exception {
    String topic = "relay-" + tag;
    kafka.createTopic(topic, 3);
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        TopicWatch watch = new TopicWatch(kafka.bootstrapServers(), topic)) {
      Prewrite.inserts(client.getDatabase("bench").getCollection("orders"), changes);
      watch.awaitReady();
      try (KafkaSink<BsonDocument> sink = KafkaSink.builder(kafka.bootstrapServers(), topic,
              MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build()).build()) {
        long start = System.nanoTime();
        try (WallProfile profile = WallProfile.relay("relay");
            Listener<BsonDocument> l = Listener.builder(
                MongoChangeFeed.builder(client, "bench", "orders").build(),
                MongoLeaseStore.builder(client.getDatabase("bench")).build())
            .group("relay")
            .checkpoint(policy)
            .handler(sink)
            .build()
            .start()) {
          long end = watch.awaitCount(changes, Duration.ofMinutes(10));
          return new Timings.Run(start, watch.receivedAt(1), end, changes, profile.split());
        }
      }
    }
  }

  /**
   * The connector's run, from the REST resume of its paused tasks to the last record received (the
   * marker written before it was created is the topic's first record, not counted).
   */
  private static Timings.Run connector(EmbeddedKafka kafka, ConnectWorkers workers, int tasks, boolean exactlyOnce,
      int changes, String tag) throws Exception {
    String name = "bench-" + tag;
    String prefix = "t-" + tag;
    String topic = prefix + ".bench.orders";
    kafka.createTopic(topic, 3);
    try (EmbeddedMongo mongo = EmbeddedMongo.start(); MongoClient client = mongo.client();
        TopicWatch watch = new TopicWatch(kafka.bootstrapServers(), topic)) {
      MongoCollection<Document> orders = client.getDatabase("bench").getCollection("orders");
      // The oplog's oldest entry: every task starts there (startup.mode=oldest), whenever it opens.
      orders.insertOne(new Document("_id", "marker"));
      workers.putConnector(name, connectorConfig(mongo.connectionString(), "orders", prefix, tasks, tasks,
          exactlyOnce));
      watch.awaitReady();
      await().atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofMillis(50))
          .until(() -> workers.inState(name, "RUNNING", tasks) && watch.count() >= 1);
      workers.call("PUT", "/connectors/" + name + "/pause", null);
      await().atMost(Duration.ofMinutes(1)).pollInterval(Duration.ofMillis(50))
          .until(() -> workers.inState(name, "PAUSED", tasks));
      Prewrite.inserts(orders, changes);
      long start = System.nanoTime();
      long end;
      String split;
      try (WallProfile profile = WallProfile.connectorTask()) {
        workers.call("PUT", "/connectors/" + name + "/resume", null);
        end = watch.awaitCount(changes + 1L, Duration.ofMinutes(10));
        split = profile.split();
      }
      long first = watch.receivedAt(2);
      workers.remove(name, Duration.ofMinutes(1));
      return new Timings.Run(start, first, end, changes, split);
    }
  }

  /**
   * Kills the child worker that holds one of the connector's two tasks while changes stream;
   * returns {ms until the REST status shows every task running elsewhere, ms until the first
   * record of the dead worker's partition from its new task}.
   */
  private static long[] resume(EmbeddedKafka kafka, ConnectWorkers workers, boolean exactlyOnce, String mongoUri,
      MongoClient client, String tag) throws Exception {
    try (ChildJvm child = ChildJvm.start("worker-" + tag, List.of("-Xmx384m", "-XX:+UseSerialGC"),
        ChildWorkerMain.class, workers.childArgs())) {
      String childId = child.awaitLineStartingWith("WORKER-URL ", Duration.ofMinutes(2))
          .substring("WORKER-URL ".length()).trim().replaceFirst("^https?://", "").replaceFirst("/$", "");
      String collection = "resume_" + tag;
      client.getDatabase("bench").createCollection(collection);
      String prefix = "r-" + tag;
      String topic = prefix + ".bench." + collection;
      kafka.createTopic(topic, 3);
      Map<String, String> config = connectorConfig(mongoUri, collection, prefix, 2, 2, exactlyOnce);
      config.put("startup.mode", "latest");
      String name = "resume-" + tag;
      workers.putConnector(name, config);
      await().atMost(Duration.ofMinutes(2)).pollInterval(Duration.ofMillis(100))
          .until(() -> workers.inState(name, "RUNNING", 2) && workers.taskWorkers(name).containsValue(childId));
      Set<Integer> doomed = new HashSet<>();
      Map<Integer, String> placement = workers.taskWorkers(name);
      workers.taskConfigs(name).forEach((task, cfg) -> {
        if (childId.equals(placement.get(task))) {
          for (String unit : cfg.path("sluice.task.units").asText().split(",")) {
            doomed.add(Integer.parseInt(unit.substring(0, unit.indexOf('/'))));
          }
        }
      });

      AtomicLong before = new AtomicLong();
      AtomicLong firstEpoch = new AtomicLong(-1);
      AtomicBoolean armed = new AtomicBoolean();
      AtomicLong resumedAt = new AtomicLong();
      CountDownLatch resumed = new CountDownLatch(1);
      TopicWatch.Listener probe = (r, now) -> {
        if (!doomed.contains(PartitionSpec.indexOf(r.key(), 2))) {
          return;
        }
        Header h = r.headers().lastHeader(Envelope.HEADER_FENCE_EPOCH);
        long epoch = Long.parseLong(new String(h.value(), StandardCharsets.UTF_8));
        if (!armed.get()) {
          firstEpoch.compareAndSet(-1, epoch);
          before.incrementAndGet();
        } else if (epoch > firstEpoch.get() && resumedAt.get() == 0) {
          resumedAt.set(now);
          resumed.countDown();
        }
      };
      AtomicBoolean writing = new AtomicBoolean(true);
      AtomicReference<Throwable> writerFailed = new AtomicReference<>();
      MongoCollection<Document> docs = client.getDatabase("bench").getCollection(collection);
      Thread writer = new Thread(() -> {
        try {
          for (int seq = 1; writing.get(); seq++) {
            for (int k = 0; k < 8 && writing.get(); k++) {
              if (seq == 1) {
                docs.insertOne(new Document("_id", "k" + k).append("seq", seq));
              } else {
                docs.updateOne(Filters.eq("_id", "k" + k), Updates.set("seq", seq));
              }
              LockSupport.parkNanos(Duration.ofMillis(5).toNanos()); // pacing, not synchronisation
            }
          }
        } catch (Throwable t) {
          writerFailed.set(t);
        }
      }, "writer-" + tag);
      try (TopicWatch watch = new TopicWatch(kafka.bootstrapServers(), topic, probe)) {
        watch.awaitReady();
        writer.start();
        // The dead worker's partitions published and committed their offsets before the kill.
        await().atMost(Duration.ofMinutes(1)).pollInterval(Duration.ofMillis(100))
            .until(() -> before.get() >= 50 && committed(workers, name, doomed));
        armed.set(true);
        long killedAt = System.nanoTime();
        child.kill();
        AtomicLong reassignedAt = new AtomicLong();
        await().atMost(Duration.ofMinutes(6)).pollInterval(Duration.ofMillis(20)).until(() -> {
          if (workers.inState(name, "RUNNING", 2) && !workers.taskWorkers(name).containsValue(childId)) {
            reassignedAt.set(System.nanoTime());
            return true;
          }
          return false;
        });
        if (!resumed.await(5, TimeUnit.MINUTES)) {
          throw new IllegalStateException("no record of partitions " + doomed + " from a new task after the kill");
        }
        writing.set(false);
        writer.join();
        if (writerFailed.get() != null) {
          throw new IllegalStateException("writer failed", writerFailed.get());
        }
        workers.remove(name, Duration.ofMinutes(1));
        return new long[] {
          TimeUnit.NANOSECONDS.toMillis(reassignedAt.get() - killedAt),
          TimeUnit.NANOSECONDS.toMillis(resumedAt.get() - killedAt)
        };
      } finally {
        writing.set(false);
        writer.join();
      }
    }
  }

  /** Whether every partition in {@code partitions} has a committed offset. */
  private static boolean committed(ConnectWorkers workers, String name, Set<Integer> partitions) {
    Set<Integer> found = new HashSet<>();
    JsonNode offsets = workers.call("GET", "/connectors/" + name + "/offsets", null).path("offsets");
    offsets.forEach(o -> {
      if (!o.path("offset").path("position").asText().isBlank()) {
        found.add(o.path("partition").path("partition").asInt());
      }
    });
    return found.containsAll(partitions);
  }
}
