package dev.sluice.demo.relay;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.ConfigurationException;
import dev.sluice.demo.Pacer;
import dev.sluice.demo.Polling;
import dev.sluice.demo.VerificationTable;
import dev.sluice.feed.Position;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.inbox.MongoInbox;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.bson.Document;

/**
 * The relay demo (issue 4): one collection relayed to Kafka and to AMQP by two listeners with
 * their own stream names (so their own leases and checkpoints), each in a child JVM. A writer
 * inserts and updates documents over a set of keys, each write carrying the key's next sequence
 * number. Mid-stream each relay is killed with SIGKILL between two checkpoints, once the broker
 * already holds messages its checkpoint does not cover; then a replacement relay starts, takes the
 * lease over and re-publishes from the checkpoint, so the consumers really receive duplicates. (The
 * replacement's JVM is launched idle at the beginning, because JVM start-up takes seconds on a
 * busy machine; its listener starts only after the kill.)
 * The consumers de-duplicate with the MongoDB inbox (their own embedded MongoDB) and the demo
 * verifies against its own reading of the change stream: nothing lost, per-key order kept after
 * de-duplication, every duplicate received removed by the inbox.
 */
public final class RelayDemo {
  /** How often the relay demo polls its kill-point conditions. */
  private static final Duration POLL = Duration.ofMillis(20);
  static final String DATABASE = "shop";
  static final String COLLECTION = "orders";
  static final String KAFKA = "kafka";
  static final String AMQP = "amqp";
  static final String TOPIC = "orders";
  static final String EXCHANGE = "orders";
  static final String QUEUE = "orders-consumer";
  private static final int TOPIC_PARTITIONS = 3;
  private static final Duration STARTUP = Duration.ofSeconds(90);

  /** The stream name (and so lease name prefix) of the relay to {@code broker}. */
  static String streamName(String broker) {
    return DATABASE + "." + COLLECTION + "." + broker;
  }

  /**
   * Demo parameters.
   *
   * @param changes writes to make (inserts and updates)
   * @param keys distinct documents written to
   * @param ratePerSecond writer pace
   * @param checkpointEvery changes per relay checkpoint (replacements also commit after 1 s)
   * @param lease relay lease duration: how long a killed relay's partition waits for a new owner
   */
  public record Settings(int changes, int keys, int ratePerSecond, int checkpointEvery, Duration lease) {
    public Settings {
      ConfigurationException.require(keys >= 1, "keys", keys, "must be at least 1");
      ConfigurationException.require(checkpointEvery >= 2, "checkpointEvery", checkpointEvery,
          "must be at least 2 (the relays are killed between two checkpoints)");
      ConfigurationException.require(changes >= 3 * checkpointEvery + keys, "changes", changes,
          "must be at least 3 * checkpointEvery + keys = " + (3 * checkpointEvery + keys));
      ConfigurationException.require(ratePerSecond >= 1, "ratePerSecond", ratePerSecond, "must be at least 1");
      ConfigurationException.requireNonNull(lease, "lease");
      ConfigurationException.require(lease.toMillis() >= 300, "lease", lease, "must be at least 300 ms");
    }

    public static Settings defaults() {
      return new Settings(3000, 100, 500, 50, Duration.ofSeconds(2));
    }
  }

  /**
   * What the SIGKILL of one relay left behind.
   *
   * @param checkpointed changes its last checkpoint covered
   * @param atBroker distinct messages the consumer had already received from it
   */
  public record Kill(String broker, String relay, long pid, int checkpointed, int atBroker) {
    /** Messages the replacement must publish again: the broker has them, the checkpoint does not. */
    public int forcedRedeliveries() {
      return Math.max(0, atBroker - checkpointed);
    }
  }

  /**
   * The verification of one broker.
   *
   * @param received messages the consumer received, duplicates included
   * @param duplicatesReceived received minus distinct message ids received
   * @param duplicatesRemoved messages the inbox recognised as processed before
   * @param applied messages applied once through the inbox
   * @param lost changes in the feed never applied (must be 0)
   * @param orderViolations applied messages that came after a later change of the same key, by
   *     feed order or by the documents' sequence numbers (must be 0)
   * @param notInFeed applied messages whose change the verifier's cursor does not know (must be 0)
   */
  public record BrokerResult(String broker, int written, int received, int duplicatesReceived,
      int duplicatesRemoved, int applied, int lost, int orderViolations, int notInFeed, Kill kill,
      String consumerFailure) {
    public boolean ok() {
      return lost == 0 && orderViolations == 0 && notInFeed == 0 && applied == written
          && duplicatesRemoved == duplicatesReceived && received == applied + duplicatesRemoved
          && duplicatesReceived >= kill.forcedRedeliveries() && consumerFailure == null;
    }
  }

  /** The outcome: {@link #ok()} is the exit status. */
  public record Result(int written, int feedChanges, List<BrokerResult> brokers) {
    public Result {
      brokers = List.copyOf(brokers);
    }

    public boolean ok() {
      return feedChanges == written && brokers.stream().allMatch(BrokerResult::ok);
    }

    public BrokerResult broker(String name) {
      return brokers.stream().filter(b -> b.broker().equals(name)).findFirst().orElseThrow();
    }
  }

  private final Settings settings;
  private final PrintStream out;
  private final List<ChildJvm> relays = new CopyOnWriteArrayList<>();

  public RelayDemo(Settings settings, PrintStream out) {
    this.settings = settings;
    this.out = out;
  }

  public Result run() throws Exception {
    ScheduledExecutorService status = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "relay-demo-status");
      t.setDaemon(true);
      return t;
    });
    List<AutoCloseable> resources = new ArrayList<>();
    Thread writer = null;
    try {
      // Kafka starts slowest: start it while the others start.
      CompletableFuture<EmbeddedKafka> startingKafka = CompletableFuture.supplyAsync(EmbeddedKafka::start);
      resources.add(() -> startingKafka.thenAccept(EmbeddedKafka::close).join());
      EmbeddedMongo source = closeLater(resources, EmbeddedMongo.start());
      EmbeddedMongo consumerDb = closeLater(resources, EmbeddedMongo.start());
      EmbeddedAmqpBroker amqp = closeLater(resources, EmbeddedAmqpBroker.start());
      EmbeddedKafka kafka = startingKafka.join();
      MongoClient client = closeLater(resources, source.client());
      MongoClient consumerClient = closeLater(resources, consumerDb.client());
      kafka.createTopic(TOPIC, TOPIC_PARTITIONS);
      amqp.declareQueue(EXCHANGE, QUEUE, streamName(AMQP) + ".*");
      out.printf("Embedded servers: MongoDB (source) %s, MongoDB (consumers' inbox) %s, Kafka %s, AMQP %s%n",
          source.connectionString(), consumerDb.connectionString(), kafka.bootstrapServers(), amqp.uri());

      LeaseStore leases = MongoLeaseStore.builder(client.getDatabase(DATABASE)).build();
      FeedTracker tracker = closeLater(resources, new FeedTracker(client));
      InboxConsumer kafkaConsumer = new InboxConsumer(KAFKA,
          MongoInbox.create(consumerClient.getDatabase("consumers"), "inbox_kafka"));
      InboxConsumer amqpConsumer = new InboxConsumer(AMQP,
          MongoInbox.create(consumerClient.getDatabase("consumers"), "inbox_amqp"));
      KafkaReceiver kafkaReceiver = closeLater(resources, new KafkaReceiver(kafka, kafkaConsumer));
      AmqpReceiver amqpReceiver = closeLater(resources, new AmqpReceiver(amqp, amqpConsumer));

      // Each first relay holds (and is then killed) halfway between two checkpoints, Kafka's at a
      // third of the stream, AMQP's at two thirds.
      int every = settings.checkpointEvery();
      int kafkaHold = settings.changes() / 3 / every * every + every / 2;
      int amqpHold = 2 * settings.changes() / 3 / every * every + every / 2;
      ChildJvm kafkaRelay = launchRelay(KAFKA, 1, kafkaHold, source, kafka.bootstrapServers());
      ChildJvm amqpRelay = launchRelay(AMQP, 1, amqpHold, source, amqp.uri());
      ChildJvm kafkaReplacement = launchRelay(KAFKA, 2, 0, source, kafka.bootstrapServers());
      ChildJvm amqpReplacement = launchRelay(AMQP, 2, 0, source, amqp.uri());
      kafkaRelay.awaitLineStartingWith("ACQUIRED", STARTUP);
      amqpRelay.awaitLineStartingWith("ACQUIRED", STARTUP);
      out.printf("Started 2 relay processes: %s -> Kafka topic '%s', %s -> AMQP exchange '%s' "
              + "(checkpoint every %d changes, lease %d ms), and 2 idle JVMs for their replacements%n",
          streamName(KAFKA), TOPIC, streamName(AMQP), EXCHANGE, settings.checkpointEvery(), settings.lease().toMillis());

      AtomicInteger written = new AtomicInteger();
      long started = System.nanoTime();
      Runnable printStatus = () -> printStatus(started, written.get(), kafkaConsumer, amqpConsumer);
      status.scheduleAtFixedRate(printStatus, 1, 1, TimeUnit.SECONDS);
      MongoCollection<Document> orders = client.getDatabase(DATABASE).getCollection(COLLECTION);
      writer = new Thread(() -> write(orders, written), "relay-demo-writer");
      writer.setDaemon(true);
      writer.start();

      Kill kafkaKill = killWhileHolding(kafkaRelay, KAFKA, kafkaConsumer, leases, tracker, kafkaHold);
      startStandby(kafkaReplacement);
      Kill amqpKill = killWhileHolding(amqpRelay, AMQP, amqpConsumer, leases, tracker, amqpHold);
      startStandby(amqpReplacement);

      writer.join();
      boolean complete = awaitWhileProgressing(Duration.ofSeconds(30), () -> {
        failIfBroken(kafkaConsumer, amqpConsumer);
        return new int[] {tracker.size(), kafkaConsumer.received(), amqpConsumer.received()};
      }, () -> tracker.size() >= written.get() && kafkaConsumer.applied() >= written.get()
          && amqpConsumer.applied() >= written.get());
      Polling.stopQuietly(status);
      if (!complete) {
        out.println(">>> no progress for 30 s before every change was applied; verifying what arrived");
      }
      // Stop consuming before counting, so received, applied and removed are one consistent cut.
      kafkaReceiver.close();
      amqpReceiver.close();
      printStatus.run();

      Result result = new Result(written.get(), tracker.size(), List.of(
          verify(KAFKA, written.get(), kafkaConsumer, tracker, kafkaKill),
          verify(AMQP, written.get(), amqpConsumer, tracker, amqpKill)));
      printTable(result);
      return result;
    } finally {
      status.shutdownNow();
      if (writer != null) {
        writer.interrupt(); // only still running if the demo failed
      }
      relays.forEach(ChildJvm::close);
      for (int i = resources.size() - 1; i >= 0; i--) {
        try {
          resources.get(i).close();
        } catch (Exception e) {
          out.println("cleanup: " + e);
        }
      }
    }
  }

  private static <T extends AutoCloseable> T closeLater(List<AutoCloseable> resources, T resource) {
    resources.add(resource);
    return resource;
  }

  /**
   * Launches a relay JVM. A replacement ({@code holdAt == 0}) is launched as a standby: it starts
   * its listener only when {@link #startStandby} tells it to, after the kill.
   */
  private ChildJvm launchRelay(String broker, int instance, int holdAt, EmbeddedMongo source, String brokerAddress) {
    String name = broker + "-relay-" + instance;
    ChildJvm relay = ChildJvm.start(name, RelayNode.class, name, broker, source.connectionString(), brokerAddress,
        Integer.toString(settings.checkpointEvery()), Long.toString(settings.lease().toMillis()),
        Integer.toString(holdAt), Boolean.toString(holdAt == 0));
    relays.add(relay);
    return relay;
  }

  private void startStandby(ChildJvm replacement) {
    replacement.awaitLineStartingWith("STANDBY", STARTUP);
    replacement.send("start");
    out.printf(">>> started the relay in %s (pid %d); it takes the lease over once the killed relay's lease "
        + "expired%n", replacement.name(), replacement.pid());
  }

  /**
   * Kills the relay (SIGKILL) while it holds inside its handler after handing change {@code
   * holdAt} to its sink, between two checkpoints, once the consumer has received at least one
   * message its checkpoint does not cover: the replacement must publish those again.
   */
  private Kill killWhileHolding(ChildJvm relay, String broker, InboxConsumer consumer, LeaseStore leases,
      FeedTracker tracker, int holdAt) throws InterruptedException {
    relay.awaitLine(("HOLDING " + holdAt)::equals, Duration.ofSeconds(120));
    // The relay is blocked in its handler, so its checkpoint cannot move any more.
    Position checkpoint = leases.read("relay/" + streamName(broker) + "#0of1").map(LeaseRecord::checkpoint).orElse(null);
    int checkpointed = Polling.value(Duration.ofSeconds(10), POLL, () -> tracker.changesCoveredBy(checkpoint))
        .orElseGet(() -> lastCount(relay, "COMMITTED "));
    // The received ids are a subset of the first `holdAt` changes, so once more than
    // `checkpointed` arrived, at least that many beyond the checkpoint reached the broker.
    Polling.until(Duration.ofSeconds(60), POLL, () -> consumer.distinctReceived() > checkpointed);
    // Normally everything handed reaches the broker: wait a little for it, so the figure is exact.
    Polling.until(Duration.ofSeconds(10), POLL, () -> consumer.distinctReceived() >= holdAt);
    int atBroker = consumer.distinctReceived();
    relay.kill();
    Kill kill = new Kill(broker, relay.name(), relay.pid(), checkpointed, atBroker);
    out.printf(">>> SIGKILL %s (pid %d) inside its handler, after it handed %d changes to its sink: its checkpoint "
            + "covers %d, the %s consumer already received %d; the replacement must publish at least %d again%n",
        relay.name(), relay.pid(), holdAt, checkpointed, broker, atBroker, kill.forcedRedeliveries());
    return kill;
  }

  private void write(MongoCollection<Document> orders, AtomicInteger written) {
    Random random = new Random(4);
    int[] seq = new int[settings.keys()];
    Pacer pacer = new Pacer(settings.ratePerSecond());
    for (int i = 0; i < settings.changes(); i++) {
      // Every key gets its insert first, then updates land on random keys.
      int k = i < settings.keys() ? i : random.nextInt(settings.keys());
      String id = String.format("order-%03d", k);
      int s = ++seq[k];
      if (s == 1) {
        orders.insertOne(new Document("_id", id).append("seq", s).append("amount", 10 + random.nextInt(90)));
      } else {
        orders.updateOne(Filters.eq("_id", id),
            Updates.combine(Updates.set("seq", s), Updates.set("amount", 10 + random.nextInt(90))));
      }
      written.incrementAndGet();
      if (!pacer.pace()) {
        return;
      }
    }
  }

  private BrokerResult verify(String broker, int written, InboxConsumer consumer, FeedTracker tracker, Kill kill) {
    Map<String, List<InboxConsumer.Applied>> applied = consumer.appliedPerKey();
    int orderViolations = 0;
    int notInFeed = 0;
    for (List<InboxConsumer.Applied> history : applied.values()) {
      int previousIndex = -1;
      int previousSeq = Integer.MIN_VALUE;
      for (InboxConsumer.Applied a : history) {
        Optional<Integer> index = tracker.indexOf(a.changeId());
        if (index.isEmpty()) {
          notInFeed++;
          continue;
        }
        if (index.get() < previousIndex || a.seq() < previousSeq) {
          orderViolations++;
        }
        previousIndex = Math.max(previousIndex, index.get());
        previousSeq = Math.max(previousSeq, a.seq());
      }
    }
    int lost = 0;
    for (Map.Entry<String, List<String>> key : tracker.idsPerKey().entrySet()) {
      Set<String> appliedIds = applied.getOrDefault(key.getKey(), List.of()).stream()
          .map(InboxConsumer.Applied::changeId).collect(Collectors.toSet());
      for (String id : key.getValue()) {
        if (!appliedIds.contains(id)) {
          lost++;
        }
      }
    }
    RuntimeException failure = consumer.failure();
    return new BrokerResult(broker, written, consumer.received(), consumer.received() - consumer.distinctReceived(),
        consumer.droppedByInbox(), consumer.applied(), lost, orderViolations, notInFeed, kill,
        failure == null ? null : failure.toString());
  }

  private void failIfBroken(InboxConsumer... consumers) {
    for (InboxConsumer c : consumers) {
      if (c.failure() != null) {
        throw new IllegalStateException("The " + c.broker() + " consumer failed: " + c.failure(), c.failure());
      }
    }
  }

  /** Changes the relays to {@code broker} checkpointed (so the broker acknowledged), re-sends included. */
  private int relayed(String broker) {
    int sum = 0;
    for (ChildJvm relay : relays) {
      if (relay.name().startsWith(broker + "-")) {
        sum += lastCount(relay, "COMMITTED ");
      }
    }
    return sum;
  }

  /** The number on the relay's last output line starting with {@code prefix}, 0 if none. */
  private static int lastCount(ChildJvm relay, String prefix) {
    List<String> lines = relay.output();
    for (int i = lines.size() - 1; i >= 0; i--) {
      if (lines.get(i).startsWith(prefix)) {
        return Integer.parseInt(lines.get(i).substring(prefix.length()).trim());
      }
    }
    return 0;
  }

  private void printStatus(long started, int written, InboxConsumer kafka, InboxConsumer amqp) {
    try {
      out.printf("[%3ds] written=%5d | relayed kafka=%5d amqp=%5d | consumed kafka=%5d amqp=%5d"
              + " | duplicates dropped by inbox kafka=%3d amqp=%3d%n",
          TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started), written, relayed(KAFKA), relayed(AMQP),
          kafka.received(), amqp.received(), kafka.droppedByInbox(), amqp.droppedByInbox());
    } catch (RuntimeException e) {
      out.println("status unavailable: " + e);
    }
  }

  private void printTable(Result r) {
    BrokerResult k = r.broker(KAFKA);
    BrokerResult a = r.broker(AMQP);
    VerificationTable table = new VerificationTable(out, 36, "kafka", "amqp");
    table.row("changes written", k.written(), a.written());
    table.row("messages received", k.received(), a.received());
    table.row("duplicates received", k.duplicatesReceived(), a.duplicatesReceived());
    table.row("duplicates removed by the inbox", k.duplicatesRemoved(), a.duplicatesRemoved());
    table.row("applied once (after the inbox)", k.applied(), a.applied());
    table.row("lost (must be 0)", k.lost(), a.lost());
    table.row("per-key order violations (must be 0)", k.orderViolations(), a.orderViolations());
    table.end();
    out.printf("changes in the source change stream: %d (written: %d)%n", r.feedChanges(), r.written());
    for (BrokerResult b : r.brokers()) {
      if (b.kill().forcedRedeliveries() > 0) {
        out.printf("%s: the relay was killed with at least %d messages beyond its checkpoint at the broker%n",
            b.broker(), b.kill().forcedRedeliveries());
      } else {
        out.printf("%s: no message beyond the checkpoint reached the consumer before the kill; this run "
            + "did not force redeliveries%n", b.broker());
      }
      if (b.notInFeed() > 0) {
        out.printf("%s: %d applied messages are not in the source change stream%n", b.broker(), b.notInFeed());
      }
      if (b.consumerFailure() != null) {
        out.printf("%s: the consumer failed: %s%n", b.broker(), b.consumerFailure());
      }
    }
    out.println(r.ok() ? "RESULT: OK" : "RESULT: FAILED");
  }

  /**
   * Polls until {@code done}; gives up (returns false) once {@code progress} has not changed for
   * {@code idle}, so a lost message shows in the table instead of a hang.
   */
  private static boolean awaitWhileProgressing(Duration idle, Supplier<int[]> progress, BooleanSupplier done)
      throws InterruptedException {
    int[] last = progress.get();
    long lastChange = System.nanoTime();
    while (!done.getAsBoolean()) {
      int[] now = progress.get();
      if (!java.util.Arrays.equals(now, last)) {
        last = now;
        lastChange = System.nanoTime();
      } else if (System.nanoTime() - lastChange > idle.toNanos()) {
        return false;
      }
      TimeUnit.MILLISECONDS.sleep(50);
    }
    return true;
  }
}
