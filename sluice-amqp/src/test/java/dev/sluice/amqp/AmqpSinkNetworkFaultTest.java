package dev.sluice.amqp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.SinkException;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The AMQP sink publishing with confirms through a fault proxy in front of the broker (every
 * connection of the sink goes through it: asserted on its counters), driven as the listener drives
 * it: a batch of changes handled, then flushed; a batch whose flush failed is delivered again, and
 * only a flushed batch counts as checkpointed. The broker is blackholed and its connections reset
 * mid-batch. What the queue holds is read around the proxy.
 */
class AmqpSinkNetworkFaultTest {
  private static final Duration FLUSH_TIMEOUT = Duration.ofSeconds(2);
  /**
   * A call that has not returned after this long is hanging: reported as such instead of holding
   * the test (an unbounded client wait, such as a channel RPC, lasts 10 minutes by default).
   */
  private static final Duration HANGING = FLUSH_TIMEOUT.multipliedBy(4);
  private static final AtomicInteger EXCHANGES = new AtomicInteger();
  private static EmbeddedAmqpBroker broker;

  @RegisterExtension final FaultProxies proxies = new FaultProxies();

  private final Fence fence = new Fence("orders#0", "owner-1", 1);
  private long longestHandleNanos;
  private long longestFlushNanos;
  private int failedFlushes;

  @BeforeAll
  static void startBroker() {
    broker = EmbeddedAmqpBroker.start();
  }

  @AfterAll
  static void stopBroker() {
    if (broker != null) {
      broker.close();
    }
  }

  private static ChangeEvent<BsonDocument> change(int n) {
    String key = "k" + (n % 4);
    Instant t = Instant.now();
    return new ChangeEvent<>("change-" + n, "shop.orders", new Position("p" + n, t), Operation.UPDATE, key,
        new BsonDocument("_id", new BsonString(key)),
        new BsonDocument("_id", new BsonString(key)).append("n", new BsonInt32(n)), t, null);
  }

  private AmqpSink<BsonDocument> sink(String exchange, FaultProxy proxy) {
    return AmqpSink.builder(broker.connectionFactory(proxy), exchange,
            MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
        .flushTimeout(FLUSH_TIMEOUT)
        .build();
  }

  private String exchange() {
    String x = "net-" + EXCHANGES.incrementAndGet();
    broker.declareQueue(x, x, "#");
    return x;
  }

  /** Handles changes from..to-1, bounded per call; false if a handle or the flush failed. */
  private boolean deliver(AmqpSink<BsonDocument> sink, int from, int to) {
    try {
      for (int n = from; n < to; n++) {
        ChangeEvent<BsonDocument> e = change(n);
        long t = System.nanoTime();
        try {
          assertTimeoutPreemptively(HANGING, () -> sink.handle(e, fence), "handle hangs");
        } finally {
          longestHandleNanos = Math.max(longestHandleNanos, System.nanoTime() - t);
        }
      }
      return flush(sink);
    } catch (SinkException e) {
      return false;
    }
  }

  private boolean flush(AmqpSink<BsonDocument> sink) {
    long t = System.nanoTime();
    try {
      assertTimeoutPreemptively(HANGING, () -> sink.flush(fence), "flush hangs");
      return true;
    } catch (SinkException e) {
      failedFlushes++;
      return false;
    } finally {
      longestFlushNanos = Math.max(longestFlushNanos, System.nanoTime() - t);
    }
  }

  /** The message ids the queue holds now, read around the proxy. */
  private static List<String> drain(String queue) throws Exception {
    List<String> ids = new ArrayList<>();
    try (Connection c = broker.connectionFactory().newConnection(); Channel ch = c.createChannel()) {
      for (GetResponse r = ch.basicGet(queue, true); r != null; r = ch.basicGet(queue, true)) {
        ids.add(r.getProps().getMessageId());
      }
    }
    return ids;
  }

  private static Set<String> ids(int from, int to) {
    Set<String> out = new HashSet<>();
    for (int n = from; n < to; n++) {
      out.add("change-" + n);
    }
    return out;
  }

  @Test
  void aBlackholeAndResetsMidBatchLoseNothingAndEveryCallReturnsWithinItsBound() throws Exception {
    String exchange = exchange();
    FaultProxy proxy = proxies.to("amqp", "127.0.0.1", broker.port());
    AmqpSink<BsonDocument> sink = sink(exchange, proxy);
    Set<String> delivered = new HashSet<>();
    int batch = 10;
    int checkpoint = 0;
    try {
      assertThat(deliver(sink, 0, batch)).isTrue();
      checkpoint = batch;
      assertThat(proxy.connectionsAccepted()).as("the sink connects through the proxy").isEqualTo(1);

      // Blackhole mid-batch: the publishes are held, the flush fails; delivered again (as the
      // listener does from its checkpoint) into the blackhole, where connecting and opening a
      // channel must fail in bounded time too; then the network heals and the batch goes out.
      proxy.blackhole(Duration.ofSeconds(30));
      assertThat(deliver(sink, checkpoint, checkpoint + batch)).as("a flush into the blackhole").isFalse();
      assertThat(deliver(sink, checkpoint, checkpoint + batch)).as("again, on a new channel").isFalse();
      assertThat(deliver(sink, checkpoint, checkpoint + batch)).as("again").isFalse();
      delivered.addAll(drain(exchange));
      assertThat(delivered).as("a checkpointed change is in the queue").containsAll(ids(0, checkpoint));
      proxy.pass();
      assertThat(deliver(sink, checkpoint, checkpoint + batch)).isTrue();
      checkpoint += batch;

      // Resets between publishing and the confirms: the flush fails or succeeds; the batch is
      // delivered again until one succeeds.
      for (int i = 0; i < 3; i++) {
        for (int n = checkpoint; n < checkpoint + batch; n++) {
          sink.handle(change(n), fence);
        }
        proxy.resetConnections();
        if (!flush(sink)) {
          int from = checkpoint;
          int to = checkpoint + batch;
          org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(30)).until(() -> deliver(sink, from, to));
        }
        checkpoint += batch;
        delivered.addAll(drain(exchange));
        assertThat(delivered).as("after reset %d, every checkpointed change is in the queue", i)
            .containsAll(ids(0, checkpoint));
      }
    } finally {
      sink.close();
    }
    delivered.addAll(drain(exchange));
    assertThat(delivered).as("nothing lost").isEqualTo(ids(0, checkpoint));
    assertThat(failedFlushes).as("the faults bit").isGreaterThanOrEqualTo(3);
    assertThat(proxy.connectionsAccepted()).as("the sink reconnected through the proxy").isGreaterThan(1);
    System.out.printf("AmqpSinkNetworkFaultTest: %d failed flushes, longest flush %d ms, longest handle %d ms,"
        + " %d connections through the proxy%n", failedFlushes, longestFlushNanos / 1_000_000,
        longestHandleNanos / 1_000_000, proxy.connectionsAccepted());
    // Documented bounds: a flush within the flush timeout, a handle within it too (connecting
    // and opening a channel included); a second of slack for a loaded machine.
    assertThat(Duration.ofNanos(longestFlushNanos)).isLessThan(FLUSH_TIMEOUT.plusSeconds(1));
    assertThat(Duration.ofNanos(longestHandleNanos)).isLessThan(FLUSH_TIMEOUT.plusSeconds(1));
  }

  @Test
  void closeReturnsWithinTheFlushTimeoutWhileTheBrokerIsBlackholed() throws Exception {
    String exchange = exchange();
    FaultProxy proxy = proxies.to("amqp", "127.0.0.1", broker.port());
    AmqpSink<BsonDocument> sink = sink(exchange, proxy);
    Fence other = new Fence("orders#1", "owner-1", 1);
    assertThat(deliver(sink, 0, 5)).isTrue();
    sink.handle(change(100), other);
    sink.flush(other);
    assertThat(proxy.connectionsAccepted()).isEqualTo(1);

    proxy.blackhole(Duration.ofSeconds(30));
    for (int n = 5; n < 10; n++) {
      sink.handle(change(n), fence); // published into the blackhole, never confirmed
    }
    long t = System.nanoTime();
    assertTimeoutPreemptively(HANGING, sink::close, "close hangs");
    Duration took = Duration.ofNanos(System.nanoTime() - t);
    System.out.printf("AmqpSinkNetworkFaultTest: blackholed close %d ms%n", took.toMillis());
    assertThat(took).isLessThan(FLUSH_TIMEOUT.plusSeconds(1));
  }
}
