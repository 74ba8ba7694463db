package dev.sluice.amqp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.inbox.MongoInbox;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The listener engine relaying a MongoDB change stream to a real AMQP broker that is stopped
 * and restarted mid-stream; the consumer de-duplicates with the inbox.
 */
class AmqpRelayTest {
  private EmbeddedAmqpBroker broker;
  private InMemoryMongo mongo;
  /** The source database: unique, so the suite also runs on a real deployment (-Dsluice.mongodb.uri). */
  private String shop;
  private MongoClient client;
  private MongoCollection<BsonDocument> orders;
  private final List<AutoCloseable> toClose = new ArrayList<>();
  /** Every message the consumer took, in arrival order: (key, message id). */
  private final List<String[]> consumed = new ArrayList<>();
  private final Map<String, List<String>> applied = new LinkedHashMap<>();

  @BeforeEach
  void start() {
    broker = EmbeddedAmqpBroker.start();
    mongo = new InMemoryMongo();
    client = mongo.client();
    shop = mongo.freshDatabase().getName();
    broker.declareQueue("orders", "orders-consumer", shop + ".orders.*");
    orders = client.getDatabase(shop).getCollection("orders", BsonDocument.class);
  }

  @AfterEach
  void stop() throws Exception {
    for (int i = toClose.size() - 1; i >= 0; i--) {
      toClose.get(i).close();
    }
    mongo.close();
    broker.close();
  }

  /** Counts failed flushes of the sink it wraps, so the test can wait for the outage to bite. */
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

  @Test
  void relaysEveryChangeAcrossABrokerRestartAndTheInboxRemovesDuplicates() throws Exception {
    AmqpSink<BsonDocument> amqp =
        AmqpSink.builder(broker.connectionFactory(), "orders",
                MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
            .flushTimeout(Duration.ofSeconds(2))
            .build();
    toClose.add(amqp);
    CountingFlushes sink = new CountingFlushes(amqp);
    LeaseStore leases = MongoLeaseStore.builder(client.getDatabase(shop)).build();
    Listener<BsonDocument> listener =
        Listener.builder(MongoChangeFeed.builder(client, shop, "orders").batchSize(200).build(), leases).group("relay")
            .handler(sink)
            .leaseDuration(Duration.ofSeconds(3))
            .pollWait(Duration.ofMillis(50))
            .checkpoint(CheckpointPolicy.every(50, Duration.ofMillis(200)))
            .build()
            .start();
    toClose.add(listener);
    MongoInbox inbox = MongoInbox.create(client.getDatabase("consumer"), "inbox");
    int keys = 5;

    write(keys, 1, 10);
    await().atMost(Duration.ofSeconds(30)).until(() -> drain(inbox) >= keys * 10);

    broker.stop();
    try {
      write(keys, 11, 20);
      await().atMost(Duration.ofSeconds(30)).until(() -> sink.failures.get() >= 2);
    } finally {
      broker.startBroker();
    }
    write(keys, 21, 25);

    int total = keys * 25;
    await().atMost(Duration.ofSeconds(60)).until(() -> drain(inbox) >= total && appliedCount() == total);

    Map<String, List<String>> feedOrder = feedOrderPerKey(total);
    assertThat(applied).isEqualTo(feedOrder);
    assertThat(consumed).hasSizeGreaterThanOrEqualTo(total);
    long duplicates = consumed.size() - total;
    System.out.println("amqp relay: " + consumed.size() + " messages consumed, " + duplicates
        + " duplicates removed by the inbox");
  }

  private int appliedCount() {
    return applied.values().stream().mapToInt(List::size).sum();
  }

  /** The consumer: takes every queued message and applies it once per id through the inbox. */
  private int drain(MongoInbox inbox) throws Exception {
    try (Connection c = broker.connectionFactory().newConnection();
        Channel ch = c.createChannel()) {
      for (GetResponse r = ch.basicGet("orders-consumer", false); r != null; r = ch.basicGet("orders-consumer", false)) {
        Envelope e = Envelope.parse(r.getBody());
        consumed.add(new String[] {e.key(), e.id()});
        inbox.processIfNew(e.id(), () -> applied.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e.id()));
        ch.basicAck(r.getEnvelope().getDeliveryTag(), false);
      }
    }
    return appliedCount();
  }

  private Map<String, List<String>> feedOrderPerKey(int expected) {
    Map<String, List<String>> perKey = new HashMap<>();
    int[] seen = {0};
    try (FeedCursor<BsonDocument> cursor =
        MongoChangeFeed.builder(client, shop, "orders").build().open(PartitionSpec.single(), StartPoint.oldest())) {
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        for (ChangeEvent<BsonDocument> e : cursor.poll(Duration.ofMillis(100))) {
          perKey.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e.id());
          seen[0]++;
        }
        return seen[0] >= expected;
      });
    }
    return new LinkedHashMap<>(perKey);
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
}
