package dev.sluice.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import dev.sluice.deadletter.DeadLetters;
import dev.sluice.deadletter.ParkedChange;
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
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.Publication;
import dev.sluice.sink.Replay;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The listener engine relaying a MongoDB change stream to a real Kafka broker. */
class KafkaRelayTest {
  private static final AtomicInteger TOPICS = new AtomicInteger();
  private static EmbeddedKafka kafka;

  private InMemoryMongo mongo;
  /** The source database: unique, so the suite also runs on a real deployment (-Dsluice.mongodb.uri). */
  private String shop;
  private MongoClient client;
  private MongoCollection<BsonDocument> orders;
  private final List<AutoCloseable> toClose = new ArrayList<>();

  @BeforeAll
  static void startKafka() {
    kafka = EmbeddedKafka.start();
  }

  @AfterAll
  static void stopKafka() {
    if (kafka != null) {
      kafka.close();
    }
  }

  @BeforeEach
  void startMongo() {
    mongo = new InMemoryMongo();
    client = mongo.client();
    shop = mongo.freshDatabase().getName();
    orders = client.getDatabase(shop).getCollection("orders", BsonDocument.class);
  }

  @AfterEach
  void stop() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    mongo.close();
  }

  private String topic() {
    String t = "relay-" + TOPICS.incrementAndGet();
    kafka.createTopic(t, 3);
    return t;
  }

  private MongoChangeFeed feed() {
    return MongoChangeFeed.builder(client, shop, "orders").batchSize(200).build();
  }

  private LeaseStore leases() {
    return MongoLeaseStore.builder(client.getDatabase(shop)).build();
  }

  private KafkaSink<BsonDocument> sink(String topic, MessageEncoder<BsonDocument> encoder) {
    KafkaSink<BsonDocument> sink =
        KafkaSink.builder(kafka.bootstrapServers(), topic, encoder)
            .flushTimeout(Duration.ofSeconds(2))
            .producerProperty("request.timeout.ms", 2000)
            .build();
    toClose.add(sink);
    return sink;
  }

  private static MessageEncoder.Builder<BsonDocument> encoder() {
    return MessageEncoder.builder(DocumentMapper.<BsonDocument>bson());
  }

  /** Counts failed flushes of the sink it wraps, so a test can wait for the outage to bite. */
  private static final class CountingFlushes implements Handler<BsonDocument> {
    final Handler<BsonDocument> delegate;
    final AtomicInteger failures = new AtomicInteger();

    CountingFlushes(Handler<BsonDocument> delegate) {
      this.delegate = delegate;
    }

    @Override
    public void handle(ChangeEvent<BsonDocument> event, Fence fence) throws Exception {
      delegate.handle(event, fence);
    }

    @Override
    public void flush(Fence fence) throws Exception {
      try {
        delegate.flush(fence);
      } catch (Exception e) {
        failures.incrementAndGet();
        throw e;
      }
    }
  }

  private Listener<BsonDocument> listener(Handler<BsonDocument> sink, FailurePolicy failure) {
    Listener<BsonDocument> l =
        Listener.builder(feed(), leases()).group("relay")
            .handler(sink)
            .leaseDuration(Duration.ofSeconds(3))
            .pollWait(Duration.ofMillis(50))
            .checkpoint(CheckpointPolicy.every(50, Duration.ofMillis(200)))
            .onFailure(failure)
            .build()
            .start();
    toClose.add(l);
    return l;
  }

  /** The feed's own order of change ids per key: what the broker must reproduce. */
  private Map<String, List<String>> feedOrderPerKey(int expected) {
    Map<String, List<String>> perKey = new LinkedHashMap<>();
    int[] seen = {0};
    try (FeedCursor<BsonDocument> cursor = feed().open(PartitionSpec.single(), StartPoint.oldest())) {
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        for (ChangeEvent<BsonDocument> e : cursor.poll(Duration.ofMillis(100))) {
          perKey.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e.id());
          seen[0]++;
        }
        return seen[0] >= expected;
      });
    }
    return perKey;
  }

  private static Map<String, List<String>> firstDeliveriesPerKey(List<ConsumerRecord<byte[], byte[]>> records) {
    Map<String, List<String>> perKey = new HashMap<>();
    java.util.Set<String> seen = new java.util.HashSet<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      String id = header(r, Envelope.HEADER_ID);
      if (seen.add(id)) {
        perKey.computeIfAbsent(new String(r.key(), StandardCharsets.UTF_8), k -> new ArrayList<>()).add(id);
      }
    }
    return perKey;
  }

  private static String header(ConsumerRecord<byte[], byte[]> r, String name) {
    return new String(r.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
  }

  private static long distinctIds(List<ConsumerRecord<byte[], byte[]>> records) {
    return records.stream().map(r -> header(r, Envelope.HEADER_ID)).distinct().count();
  }

  private void write(int keys, int from, int to) {
    for (int v = from; v <= to; v++) {
      for (int k = 0; k < keys; k++) {
        if (v == 1) {
          orders.insertOne(new BsonDocument("_id", new BsonString("order-" + k)).append("v", new BsonInt32(1)));
        } else {
          orders.updateOne(Filters.eq("_id", "order-" + k), Updates.set("v", v));
        }
      }
    }
  }

  @Test
  void relaysEveryChangeInFeedOrderPerKeyAcrossABrokerRestart() {
    String topic = topic();
    CountingFlushes sink = new CountingFlushes(sink(topic, encoder().build()));
    listener(sink, FailurePolicy.block(RetryPolicy.defaults()));
    LeaseStore leases = leases();
    int keys = 6;
    write(keys, 1, 15);
    await().atMost(Duration.ofSeconds(30))
        .until(() -> distinctIds(kafka.readAll(topic, keys * 15, Duration.ofSeconds(2))) == keys * 15);

    kafka.stopBroker();
    try {
      write(keys, 16, 30); // the listener keeps reading; its flushes fail; nothing is committed
      await().atMost(Duration.ofSeconds(30)).until(() -> sink.failures.get() >= 1);
      Position stuck = leases.read("relay/" + shop + ".orders#0of1").orElseThrow().checkpoint();
      int failed = sink.failures.get();
      await().atMost(Duration.ofSeconds(30)).until(() -> sink.failures.get() > failed);
      assertThat(leases.read("relay/" + shop + ".orders#0of1").orElseThrow().checkpoint()).isEqualTo(stuck);
    } finally {
      kafka.startBroker();
    }
    write(keys, 31, 40);

    int total = keys * 40;
    await().atMost(Duration.ofSeconds(60))
        .until(() -> distinctIds(kafka.readAll(topic, total, Duration.ofSeconds(2))) == total);
    List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll(topic, total, Duration.ofSeconds(10));
    assertThat(firstDeliveriesPerKey(records)).isEqualTo(new HashMap<>(feedOrderPerKey(total)));
  }

  @Test
  void oneSinkServesSeveralPartitionsConcurrentlyInFeedOrderPerKey() {
    String topic = topic();
    Listener<BsonDocument> l =
        Listener.builder(feed(), leases()).group("relay")
            .handler(sink(topic, encoder().build()))
            .partitions(3)
            .leaseDuration(Duration.ofSeconds(3))
            .pollWait(Duration.ofMillis(50))
            .checkpoint(CheckpointPolicy.every(20, Duration.ofMillis(100)))
            .build()
            .start();
    toClose.add(l);
    await().atMost(Duration.ofSeconds(20))
        .until(() -> l.status().stream().filter(st -> st.epoch() > 0).count() == 3);
    int keys = 9;
    write(keys, 1, 12);
    int total = keys * 12;
    await().atMost(Duration.ofSeconds(60))
        .until(() -> distinctIds(kafka.readAll(topic, total, Duration.ofSeconds(2))) == total);
    List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll(topic, total, Duration.ofSeconds(10));
    assertThat(records).hasSize(total);
    assertThat(firstDeliveriesPerKey(records)).isEqualTo(new HashMap<>(feedOrderPerKey(total)));
  }

  @Test
  void aPoisonChangeIsParkedOtherKeysFlowAndLaterChangesOfItsKeyWaitBehindIt() {
    String topic = topic();
    MongoDeadLetterStore dlq = MongoDeadLetterStore.create(client.getDatabase(shop), "deadletters");
    MessageEncoder<BsonDocument> events =
        encoder().publication(Publication.domainEvents("lastEvent", "id")).build();
    listener(sink(topic, events),
        FailurePolicy.park(RetryPolicy.attempts(2, Duration.ofMillis(10), Duration.ofMillis(20)), dlq));

    orders.insertOne(order("a", new BsonDocument("id", new BsonString("a-1"))));
    orders.insertOne(order("p", new BsonDocument("type", new BsonString("NoIdHere"))));
    await().atMost(Duration.ofSeconds(20)).until(() -> dlq.count("relay/" + shop + ".orders") == 1);
    orders.updateOne(Filters.eq("_id", "p"), Updates.set("lastEvent", new BsonDocument("id", new BsonString("p-2"))));
    orders.insertOne(order("b", new BsonDocument("id", new BsonString("b-1"))));
    orders.updateOne(Filters.eq("_id", "a"), Updates.set("lastEvent", new BsonDocument("id", new BsonString("a-2"))));

    await().atMost(Duration.ofSeconds(20))
        .until(() -> distinctIds(kafka.readAll(topic, 3, Duration.ofSeconds(1))) == 3 && dlq.count("relay/" + shop + ".orders") == 2);
    assertThat(kafka.readAll(topic, 3, Duration.ofSeconds(5)))
        .extracting(r -> header(r, Envelope.HEADER_ID))
        .containsExactlyInAnyOrder("a-1", "b-1", "a-2");
    List<ParkedChange<BsonDocument>> parked = dlq.listKey("relay/" + shop + ".orders", "p");
    assertThat(parked).hasSize(2);
    assertThat(parked.get(0).error()).contains("no id field 'id'").contains(parked.get(0).event().id());
    assertThat(parked.get(0).attempts()).isEqualTo(2);
    assertThat(parked.get(1).error()).contains("parked behind");
    assertThat(parked.get(1).event().document().getDocument("lastEvent").getString("id").getValue()).isEqualTo("p-2");

    // The operator discards the poison change and replays the rest of the key to Kafka.
    DeadLetters<BsonDocument> ops = DeadLetters.of(dlq);
    assertThat(ops.discard("relay/" + shop + ".orders", parked.get(0).event().id())).isTrue();
    DeadLetters.ReplayResult result =
        ops.replayKey("relay/" + shop + ".orders", "p", sink(topic, events), Replay.fence(shop + ".orders"));
    assertThat(result.complete()).isTrue();
    assertThat(result.replayed()).isEqualTo(1);
    assertThat(dlq.count("relay/" + shop + ".orders")).isZero();
    assertThat(kafka.readAll(topic, 4, Duration.ofSeconds(10)))
        .extracting(r -> header(r, Envelope.HEADER_ID))
        .contains("p-2");
  }

  private static BsonDocument event(String id) {
    return new BsonDocument("id", new BsonString(id));
  }

  @Test
  void aBacklogOfUpdatesPublishesEachUpdatesOwnDomainEventOnceEvenWhenTheDocumentWasDeletedSince() {
    // Issue 11 item 1: read with updateLookup, the events of a backlog came from the document as
    // it was when read: q published e0, q-2, q-2 (never q-1), o published only o-0.
    String topic = topic();
    MessageEncoder<BsonDocument> events = encoder().publication(Publication.domainEvents("lastEvent", "id")).build();
    Listener<BsonDocument> first = listener(sink(topic, events), FailurePolicy.block(RetryPolicy.defaults()));
    orders.insertOne(order("warm", event("w-0")));
    await().atMost(Duration.ofSeconds(20)).until(() -> first.status().get(0).committed() != null
        && distinctIds(kafka.readAll(topic, 1, Duration.ofSeconds(1))) == 1);
    first.close();

    // While no listener runs (a deployment, an outage, a slow sink): changes pile up.
    orders.insertOne(order("q", event("q-0")));
    orders.updateOne(Filters.eq("_id", "q"), Updates.set("lastEvent", event("q-1")));
    orders.updateOne(Filters.eq("_id", "q"), Updates.set("lastEvent", event("q-2")));
    orders.insertOne(order("o", event("o-0")));
    orders.updateOne(Filters.eq("_id", "o"), Updates.set("lastEvent", event("o-1")));
    orders.updateOne(Filters.eq("_id", "o"), Updates.combine(Updates.set("lastEvent", event("o-2")), Updates.set("state", "closed")));
    orders.updateOne(Filters.eq("_id", "o"), Updates.set("note", "no event in this one"));
    orders.deleteOne(Filters.eq("_id", "o"));
    listener(sink(topic, events), FailurePolicy.block(RetryPolicy.defaults()));

    await().atMost(Duration.ofSeconds(30))
        .until(() -> distinctIds(kafka.readAll(topic, 7, Duration.ofSeconds(1))) == 7);
    List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll(topic, 8, Duration.ofSeconds(3));
    assertThat(records).extracting(r -> header(r, Envelope.HEADER_ID)).as("every event once, none twice")
        .containsExactlyInAnyOrder("w-0", "q-0", "q-1", "q-2", "o-0", "o-1", "o-2");
    Map<String, List<String>> perDocument = new LinkedHashMap<>();
    records.forEach(r -> perDocument.computeIfAbsent(new String(r.key(), StandardCharsets.UTF_8), k -> new ArrayList<>())
        .add(header(r, Envelope.HEADER_ID)));
    assertThat(perDocument).as("in each document's order")
        .containsEntry("q", List.of("q-0", "q-1", "q-2"))
        .containsEntry("o", List.of("o-0", "o-1", "o-2"));
    assertThat(events.changesWithoutEvent()).as("the update that set no event is counted").isEqualTo(1);
  }

  @Test
  void replaysARangeAndTheCurrentStateToAnotherTopicWithoutMovingTheCheckpoint() {
    String live = topic();
    String replay = topic();
    Listener<BsonDocument> listener = listener(sink(live, encoder().build()), FailurePolicy.block(RetryPolicy.defaults()));
    write(4, 1, 5);
    await().atMost(Duration.ofSeconds(30))
        .until(() -> distinctIds(kafka.readAll(live, 20, Duration.ofSeconds(1))) == 20);
    await().atMost(Duration.ofSeconds(10)).until(() -> listener.status().get(0).committed() != null);
    LeaseStore leases = leases();
    var before = leases.read("relay/" + shop + ".orders#0of1").orElseThrow().checkpoint();

    Replay.Result range =
        Replay.range(feed(), StartPoint.oldest(), null, Duration.ofMillis(500), 7, sink(replay, encoder().build()));

    assertThat(range.changes()).isEqualTo(20);
    List<ConsumerRecord<byte[], byte[]>> replayed = kafka.readAll(replay, 20, Duration.ofSeconds(10));
    assertThat(replayed).hasSize(20);
    assertThat(replayed).allSatisfy(r -> assertThat(header(r, Envelope.HEADER_FENCE_EPOCH)).isEqualTo("0"));
    assertThat(firstDeliveriesPerKey(replayed)).isEqualTo(firstDeliveriesPerKey(kafka.readAll(live, 20, Duration.ofSeconds(5))));
    assertThat(leases.read("relay/" + shop + ".orders#0of1").orElseThrow().checkpoint()).isEqualTo(before);

    Replay.Result state =
        Replay.currentState(shop + ".orders", "replay-1", orders.find(),
            d -> MongoChangeFeed.keyOf(d.get("_id")), d -> new BsonDocument("_id", d.get("_id")),
            100, sink(replay, encoder().build()));
    assertThat(state.changes()).isEqualTo(4);
    List<ConsumerRecord<byte[], byte[]>> all = kafka.readAll(replay, 24, Duration.ofSeconds(10));
    assertThat(all).hasSize(24);
    assertThat(all.stream().filter(r -> header(r, Envelope.HEADER_OPERATION).equals("SNAPSHOT"))
            .map(r -> Envelope.parse(r.value()).document().get("v").asInt()))
        .containsOnly(5)
        .hasSize(4);
  }

  /**
   * Issue 37 item 5: a flush that fails after Kafka acknowledged the first records of its batch
   * commits the checkpoint through the acknowledged prefix before sending again (ADR 0120). The
   * topic refuses the 11th change of a 20-change batch (too large for it): the stored checkpoint is
   * the 10th change's position, and delivery starts again at the 11th, not at the last checkpoint.
   */
  @Test
  void aFailedFlushCommitsTheAcknowledgedPrefixBeforeSendingAgain() {
    String topic = "relay-" + TOPICS.incrementAndGet();
    kafka.createTopic(topic, 1, Map.of("max.message.bytes", "20000"));
    LeaseStore leases = leases();
    KafkaSink<BsonDocument> sink = sink(topic, encoder().build());
    List<String> handled = new java.util.concurrent.CopyOnWriteArrayList<>();
    Map<String, Position> positions = new java.util.concurrent.ConcurrentHashMap<>();
    String[] lease = new String[1];
    Handler<BsonDocument> recording = new Handler<>() {
      @Override
      public void handle(ChangeEvent<BsonDocument> event, Fence fence) throws Exception {
        String id = event.key();
        handled.add(id);
        positions.putIfAbsent(id, event.position());
        lease[0] = fence.lease();
        sink.handle(event, fence);
      }

      @Override
      public java.util.concurrent.CompletionStage<Void> flushAsync(Fence fence) {
        return sink.flushAsync(fence);
      }
    };
    Listener<BsonDocument> l = Listener.builder(feed(), leases).group("relay")
        .handler(recording)
        .leaseDuration(Duration.ofSeconds(3))
        .pollWait(Duration.ofMillis(50))
        .checkpoint(CheckpointPolicy.every(20, Duration.ofHours(1)))
        .onFailure(FailurePolicy.block(RetryPolicy.forever(Duration.ofMillis(50), Duration.ofMillis(200))))
        .build()
        .start();
    toClose.add(l);
    await().atMost(Duration.ofSeconds(30)).until(() -> !leases.list("").isEmpty()
        && leases.list("").stream().anyMatch(r -> r.checkpoint() != null));

    for (int i = 1; i <= 20; i++) {
      String payload = i == 11 ? "x".repeat(50_000) : "small";
      orders.insertOne(new BsonDocument("_id", new BsonString(String.valueOf(i))).append("p", new BsonString(payload)));
    }
    // The 20 changes, then the refused one again (the failure policy retries it in place).
    await().atMost(Duration.ofSeconds(30)).until(() -> handled.size() >= 21);
    List<String> seen = List.copyOf(handled); // the retries of the 11th go on meanwhile
    assertThat(seen.subList(0, 20)).containsExactlyElementsOf(
        java.util.stream.IntStream.rangeClosed(1, 20).mapToObj(String::valueOf).toList());
    assertThat(seen.get(20)).as("delivered again from the first unacknowledged change").isEqualTo("11");
    assertThat(leases.read(lease[0]).orElseThrow().checkpoint())
        .as("the checkpoint stored is the acknowledged prefix: through the 10th change")
        .isEqualTo(positions.get("10"));
    assertThat(kafka.readAll(topic, 10, Duration.ofSeconds(10)))
        .extracting(r -> new String(r.key(), StandardCharsets.UTF_8))
        .startsWith("1", "2", "3", "4", "5", "6", "7", "8", "9", "10");
  }

  private static BsonDocument order(String id, BsonDocument lastEvent) {
    return new BsonDocument("_id", new BsonString(id)).append("lastEvent", lastEvent);
  }
}
