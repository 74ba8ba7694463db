package dev.sluice.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.net.FaultProxy.Direction;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

/**
 * The relay (a listener whose handler is the Kafka sink) while the network to the broker breaks:
 * the broker runs behind a fault proxy that it advertises, so every connection of the sink's
 * producers goes through it (asserted on the proxy's counters). The test reads the log around the
 * proxy through the broker's second listener, with {@code read_committed}, and compares it with
 * the checkpoint stored in the lease store (MongoDB, not behind the proxy), sampled before, during
 * and after each fault: the changes a stored checkpoint covers are always already in the log.
 */
class KafkaRelayNetworkFaultTest {
  private static final Duration FLUSH_TIMEOUT = Duration.ofSeconds(2);
  private static final AtomicInteger TOPICS = new AtomicInteger();
  private static EmbeddedKafka kafka;

  private static InMemoryMongo mongo;
  private String shop;
  private MongoClient client;
  private MongoCollection<BsonDocument> orders;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeAll
  static void startServers() {
    kafka = EmbeddedKafka.startBehindProxy(Duration.ofMinutes(10));
    mongo = new InMemoryMongo();
  }

  @AfterAll
  static void stopServers() {
    if (kafka != null) {
      kafka.close();
    }
    if (mongo != null) {
      mongo.close();
    }
  }

  @BeforeEach
  void startMongo() {
    kafka.proxy().pass();
    client = mongo.client();
    shop = mongo.freshDatabase().getName();
    orders = client.getDatabase(shop).getCollection("orders", BsonDocument.class);
  }

  @AfterEach
  void stop() throws Exception {
    kafka.proxy().pass();
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
  }

  /** Times every call of the sink it wraps and counts failed flushes. */
  private static final class TimedSink implements Handler<BsonDocument> {
    final Handler<BsonDocument> delegate;
    final AtomicInteger failedFlushes = new AtomicInteger();
    final AtomicInteger handled = new AtomicInteger();
    final AtomicLong longestHandleNanos = new AtomicLong();
    final AtomicLong longestFlushNanos = new AtomicLong();

    TimedSink(Handler<BsonDocument> delegate) {
      this.delegate = delegate;
    }

    @Override
    public void handle(ChangeEvent<BsonDocument> event, Fence fence) throws Exception {
      long t = System.nanoTime();
      try {
        delegate.handle(event, fence);
        handled.incrementAndGet();
      } finally {
        longestHandleNanos.accumulateAndGet(System.nanoTime() - t, Math::max);
      }
    }

    @Override
    public void flush(Fence fence) throws Exception {
      long t = System.nanoTime();
      try {
        delegate.flush(fence);
      } catch (Exception e) {
        failedFlushes.incrementAndGet();
        throw e;
      } finally {
        longestFlushNanos.accumulateAndGet(System.nanoTime() - t, Math::max);
      }
    }

    @Override
    public boolean concurrentCalls() {
      return false;
    }
  }

  private String topic() {
    String t = "relay-net-" + TOPICS.incrementAndGet();
    kafka.createTopic(t, 3);
    return t;
  }

  private MongoChangeFeed feed() {
    return MongoChangeFeed.builder(client, shop, "orders").batchSize(200).build();
  }

  private LeaseStore leases() {
    return MongoLeaseStore.builder(client.getDatabase(shop)).build();
  }

  private String lease() {
    return "relay/" + shop + ".orders#0of1";
  }

  private KafkaSink<BsonDocument> sink(String topic) {
    KafkaSink<BsonDocument> sink =
        KafkaSink.builder(kafka.bootstrapServers(), topic, MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
            .flushTimeout(FLUSH_TIMEOUT)
            .producerProperty("request.timeout.ms", 1000)
            .build();
    toClose.add(sink);
    return sink;
  }

  private Listener<BsonDocument> listener(Handler<BsonDocument> handler) {
    Listener<BsonDocument> l =
        Listener.builder(feed(), leases()).group("relay")
            .handler(handler)
            .leaseDuration(Duration.ofSeconds(3))
            .pollWait(Duration.ofMillis(50))
            .checkpoint(CheckpointPolicy.every(20, Duration.ofMillis(100)))
            .onFailure(FailurePolicy.block(RetryPolicy.attempts(Integer.MAX_VALUE, Duration.ofMillis(50),
                Duration.ofMillis(200))))
            .build()
            .start();
    toClose.add(l);
    return l;
  }

  /** Writes one change per key per round, on a thread of its own, until stopped. */
  private final class Writer implements AutoCloseable {
    final int keys;
    final AtomicInteger rounds = new AtomicInteger();
    final AtomicBoolean writing = new AtomicBoolean(true);
    final AtomicReference<Throwable> failed = new AtomicReference<>();
    final Thread thread;

    Writer(int keys) {
      this.keys = keys;
      this.thread = new Thread(() -> {
        try {
          while (writing.get()) {
            int v = rounds.get() + 1;
            for (int k = 0; k < keys; k++) {
              if (v == 1) {
                orders.insertOne(new BsonDocument("_id", new BsonString("order-" + k)).append("v", new BsonInt32(1)));
              } else {
                orders.updateOne(Filters.eq("_id", "order-" + k), Updates.set("v", v));
              }
            }
            rounds.set(v);
            LockSupport.parkNanos(Duration.ofMillis(20).toNanos()); // pacing, not synchronisation
          }
        } catch (Throwable t) {
          failed.set(t);
        }
      }, "writer");
      thread.start();
    }

    int written() {
      return rounds.get() * keys;
    }

    @Override
    public void close() throws InterruptedException {
      writing.set(false);
      thread.join();
      assertThat(failed.get()).as("the writer failed").isNull();
    }
  }

  /** A stored checkpoint and the change ids a read_committed consumer saw in the log just after reading it. */
  private record Sample(String when, Position checkpoint, Set<String> logged) {}

  private Sample sample(String when, LeaseStore leases, String topic) {
    Position checkpoint = leases.read(lease()).map(l -> l.checkpoint()).orElse(null);
    return new Sample(when, checkpoint, ids(readDirect(topic)));
  }

  /** Every record of {@code topic}, read with read_committed around the proxy (the broker's second listener). */
  private static List<ConsumerRecord<byte[], byte[]>> readDirect(String topic) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.directBootstrapServers());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
      return EmbeddedKafka.readToEnd(c, topic, Duration.ofSeconds(30));
    }
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    return new String(r.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
  }

  private static Set<String> ids(List<ConsumerRecord<byte[], byte[]>> records) {
    Set<String> ids = new HashSet<>();
    records.forEach(r -> ids.add(header(r, Envelope.HEADER_ID)));
    return ids;
  }

  /** The feed's change ids in feed order, and per key. */
  private List<ChangeEvent<BsonDocument>> feedFromOldest(int expected) {
    List<ChangeEvent<BsonDocument>> all = new ArrayList<>();
    try (FeedCursor<BsonDocument> cursor = feed().open(PartitionSpec.single(), StartPoint.oldest())) {
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        all.addAll(cursor.poll(Duration.ofMillis(100)));
        return all.size() >= expected;
      });
    }
    return all;
  }

  /**
   * The ids of the changes a checkpoint covers: up to the change at that position; for a position
   * between changes, those before the first change the feed gives after it (all, if none comes).
   */
  private List<String> covered(Position checkpoint, List<ChangeEvent<BsonDocument>> feedOrder) {
    if (checkpoint == null) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    for (ChangeEvent<BsonDocument> e : feedOrder) {
      out.add(e.id());
      if (e.position().token().equals(checkpoint.token())) {
        return out;
      }
    }
    List<ChangeEvent<BsonDocument>> next = new ArrayList<>();
    try (FeedCursor<BsonDocument> cursor = feed().open(PartitionSpec.single(), StartPoint.after(checkpoint))) {
      next.addAll(cursor.poll(Duration.ofSeconds(1)));
    }
    if (next.isEmpty()) {
      return out;
    }
    out.clear();
    for (ChangeEvent<BsonDocument> e : feedOrder) {
      if (e.id().equals(next.get(0).id())) {
        return out;
      }
      out.add(e.id());
    }
    throw new AssertionError("the change after checkpoint " + checkpoint + " is not in the feed read from the oldest");
  }

  private static Map<String, List<String>> firstDeliveriesPerKey(List<ConsumerRecord<byte[], byte[]>> records) {
    Map<String, List<String>> perKey = new HashMap<>();
    Set<String> seen = new HashSet<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      String id = header(r, Envelope.HEADER_ID);
      if (seen.add(id)) {
        perKey.computeIfAbsent(new String(r.key(), StandardCharsets.UTF_8), k -> new ArrayList<>()).add(id);
      }
    }
    return perKey;
  }

  @Test
  void aBlackholeAndResetsMidRunLoseNothingAndTheCheckpointNeverPassesAnUnacknowledgedRecord() throws Exception {
    String topic = topic();
    FaultProxy proxy = kafka.proxy();
    TimedSink sink = new TimedSink(sink(topic));
    listener(sink);
    LeaseStore leases = leases();
    List<Sample> samples = new CopyOnWriteArrayList<>();
    Writer writer = new Writer(4);
    try {
      await().atMost(Duration.ofSeconds(30)).until(() -> ids(readDirect(topic)).size() >= 20);
      long accepted = proxy.connectionsAccepted();
      assertThat(accepted).as("the sink's producer connects through the proxy").isPositive();
      samples.add(sample("before the blackhole", leases, topic));

      // Blackhole: requests and acknowledgements held; flushes fail after their timeout.
      ListAppender<ILoggingEvent> sinkLog = new ListAppender<>();
      sinkLog.start();
      Logger sinkLogger = (Logger) LoggerFactory.getLogger(KafkaSink.class);
      sinkLogger.addAppender(sinkLog);
      proxy.blackhole(Duration.ofSeconds(15));
      int failedBefore = sink.failedFlushes.get();
      try {
        await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(200)).until(() -> {
          samples.add(sample("during the blackhole", leases, topic));
          return sink.failedFlushes.get() >= failedBefore + 2;
        });
      } finally {
        sinkLogger.detachAppender(sinkLog);
      }
      // The outage is in Sluice's own log before a flush times out, not only when it does.
      List<String> warnings = List.copyOf(sinkLog.list).stream()
          .filter(e -> e.getLevel() == Level.WARN).map(ILoggingEvent::getFormattedMessage).toList();
      assertThat(warnings).as("the sink's warnings during the blackhole").isNotEmpty();
      assertThat(warnings.get(0)).contains("has not acknowledged what was sent for " + lease())
          .contains("after 1000 ms");
      Position stuck = leases.read(lease()).orElseThrow().checkpoint();
      samples.add(sample("end of the blackhole", leases, topic));
      proxy.pass();
      samples.add(sample("just after the blackhole", leases, topic));
      int afterBlackhole = writer.written();
      await().atMost(Duration.ofSeconds(30)).until(() -> ids(readDirect(topic)).size() >= afterBlackhole);
      assertThat(leases.read(lease()).orElseThrow().checkpoint()).as("the checkpoint moves again").isNotEqualTo(stuck);

      // Resets: every open connection (requests and acknowledgements in flight) torn down at once.
      for (int round = 0; round < 2; round++) {
        int i = round;
        long up = proxy.bytesForwarded(Direction.UPSTREAM);
        proxy.resetConnections();
        samples.add(sample("just after reset " + i, leases, topic));
        int atReset = writer.written();
        await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200)).until(() -> {
          samples.add(sample("after reset " + i, leases, topic));
          return ids(readDirect(topic)).size() >= atReset;
        });
        assertThat(proxy.bytesForwarded(Direction.UPSTREAM)).isGreaterThan(up);
      }
      assertThat(proxy.connectionsAccepted()).as("the producers reconnected through the proxy").isGreaterThan(accepted);
    } finally {
      writer.close();
    }
    List<ChangeEvent<BsonDocument>> feedOrder = feedFromOldest(writer.written());
    List<String> feedIds = feedOrder.stream().map(ChangeEvent::id).toList();
    await().atMost(Duration.ofSeconds(30)).until(() -> ids(readDirect(topic)).containsAll(feedIds));
    samples.add(sample("at the end", leases, topic));

    for (Sample s : samples) {
      assertThat(s.logged()).as("%s: the changes checkpoint %s covers are in the log", s.when(), s.checkpoint())
          .containsAll(covered(s.checkpoint(), feedOrder));
    }
    assertThat(samples).as("some checkpoints sampled while the blackhole held acknowledgements")
        .anySatisfy(s -> assertThat(s.when()).isEqualTo("during the blackhole"));
    List<ConsumerRecord<byte[], byte[]>> records = readDirect(topic);
    Map<String, List<String>> expected = new LinkedHashMap<>();
    feedOrder.forEach(e -> expected.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e.id()));
    assertThat(firstDeliveriesPerKey(records)).as("nothing lost, first deliveries in feed order per key")
        .isEqualTo(new HashMap<>(expected));
    // The documented bounds: flush within its timeout (the producer's replacement included),
    // handle within max.block.ms (= the flush timeout); one second of slack for a loaded machine.
    assertThat(Duration.ofNanos(sink.longestFlushNanos.get())).isLessThan(FLUSH_TIMEOUT.plusSeconds(1));
    assertThat(Duration.ofNanos(sink.longestHandleNanos.get())).isLessThan(FLUSH_TIMEOUT.plusSeconds(1));
    System.out.printf("KafkaRelayNetworkFaultTest: %d changes, %d records, %d failed flushes, longest flush %d ms,"
        + " longest handle %d ms, %d connections through the proxy%n", feedIds.size(), records.size(),
        sink.failedFlushes.get(), sink.longestFlushNanos.get() / 1_000_000, sink.longestHandleNanos.get() / 1_000_000,
        proxy.connectionsAccepted());
  }

  @Test
  void theRelayAndItsSinkCloseWithinTheirBoundsWhileTheBrokerIsBlackholed() {
    String topic = topic();
    FaultProxy proxy = kafka.proxy();
    KafkaSink<BsonDocument> sink = sink(topic);
    TimedSink timed = new TimedSink(sink);
    Listener<BsonDocument> relay = listener(timed);
    orders.insertOne(new BsonDocument("_id", new BsonString("order-0")).append("v", new BsonInt32(1)));
    await().atMost(Duration.ofSeconds(30)).until(() -> ids(readDirect(topic)).size() == 1);
    assertThat(proxy.connectionsAccepted()).isPositive();

    proxy.blackhole(Duration.ofSeconds(30));
    int handled = timed.handled.get();
    for (int v = 2; v <= 20; v++) {
      orders.updateOne(Filters.eq("_id", "order-0"), Updates.set("v", v));
    }
    int failed = timed.failedFlushes.get();
    // Records sent into the blackhole and not acknowledged: the relay waits in its flush (for
    // up to the flush timeout, 2 s, far longer than this wait's 10 ms polls).
    await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(10))
        .until(() -> timed.handled.get() > handled);
    assertThat(timed.failedFlushes.get()).as("no flush gave up yet: records are in flight").isEqualTo(failed);
    // The sink first, with records in flight, then the relay, whose flush it cut short.
    long t = System.nanoTime();
    sink.close();
    Duration sinkClose = Duration.ofNanos(System.nanoTime() - t);
    t = System.nanoTime();
    relay.close();
    Duration relayClose = Duration.ofNanos(System.nanoTime() - t);
    System.out.printf("KafkaRelayNetworkFaultTest: blackholed close: relay %d ms, sink %d ms%n",
        relayClose.toMillis(), sinkClose.toMillis());
    // The listener's close waits for the handler call in progress and its final flush, each
    // bounded by the flush timeout; the sink's close for the producer's, bounded by it too.
    assertThat(timed.failedFlushes.get()).as("the relay's flushes into the blackhole failed").isPositive();
    assertThat(relayClose).isLessThan(FLUSH_TIMEOUT.multipliedBy(2).plusSeconds(1));
    assertThat(sinkClose).isLessThan(FLUSH_TIMEOUT.plusSeconds(1));
  }
}
