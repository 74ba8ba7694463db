package dev.sluice.amqp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.SinkException;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A returned (unroutable) message is matched to its publish however the broker orders basic.return
 * and the confirm, and however the client's reader thread and the flushing thread interleave.
 * The embedded broker (Qpid) sends the nack before the return, which is the order that raced.
 */
class AmqpReturnCorrelationTest {
  private static final Fence FENCE = new Fence("shop.orders#0", "n1", 1);
  private static EmbeddedAmqpBroker broker;

  @BeforeAll
  static void start() {
    broker = EmbeddedAmqpBroker.start();
    // Only inserts are routed; updates are unroutable.
    broker.declareQueue("inserts-only", "inserts", "shop.orders.insert");
  }

  @AfterAll
  static void stop() {
    broker.close();
  }

  private static ChangeEvent<BsonDocument> change(int n, Operation op) {
    BsonDocument key = new BsonDocument("_id", new BsonString("k" + n));
    return new ChangeEvent<>("chg-" + n, "shop.orders", Position.of("tok-" + n), op, "k" + n, key, key, null, null);
  }

  private static AmqpSinkImpl<BsonDocument> sink(AmqpSinkImpl.Probe probe) {
    return new AmqpSinkImpl<>(broker.connectionFactory(), "inserts-only",
        MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build(),
        m -> m.source().stream() + "." + m.source().operation().name().toLowerCase(Locale.ROOT),
        Duration.ofSeconds(5), 1 << 20, probe);
  }

  @Test
  void aReturnStillOnTheWireWhenTheNackWakesTheFlushIsReportedAsUnroutable() {
    CountDownLatch settled = new CountDownLatch(1);
    AtomicBoolean heldPastTheNack = new AtomicBoolean();
    AtomicBoolean allAckedSeen = new AtomicBoolean(true);
    AmqpSinkImpl.Probe probe = new AmqpSinkImpl.Probe() {
      @Override
      public void returnArriving(String messageId) {
        // Hold the client's reader thread on the return until the flushing thread has seen
        // the nack: the interleaving that lost the return under load, forced every time.
        try {
          heldPastTheNack.set(settled.await(10, TimeUnit.SECONDS));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }

      @Override
      public void confirmsSettled(boolean allAcked) {
        allAckedSeen.set(allAcked);
        settled.countDown();
      }
    };
    try (AmqpSinkImpl<BsonDocument> sink = sink(probe)) {
      sink.handle(change(1, Operation.UPDATE), FENCE);
      assertThatThrownBy(() -> sink.flush(FENCE))
          .isInstanceOf(SinkException.class)
          .hasMessageContaining("unroutable")
          .hasMessageContaining("chg-1")
          .hasMessageContaining("shop.orders.update");
    }
    assertThat(allAckedSeen).as("the broker nacked the unroutable message").isFalse();
    assertThat(heldPastTheNack).as("the return was held until the flush had seen the nack").isTrue();
  }

  @Test
  void onlyTheReturnedMessageOfAMixedBatchIsNamed() {
    try (AmqpSinkImpl<BsonDocument> sink = sink(new AmqpSinkImpl.Probe() {})) {
      sink.handle(change(1, Operation.INSERT), FENCE);
      sink.handle(change(2, Operation.UPDATE), FENCE);
      sink.handle(change(3, Operation.INSERT), FENCE);
      assertThatThrownBy(() -> sink.flush(FENCE))
          .isInstanceOf(SinkException.class)
          .hasMessageContaining("returned message chg-2 as unroutable")
          .hasMessageContaining("shop.orders.update")
          .hasMessageNotContaining("chg-1")
          .hasMessageNotContaining("chg-3")
          .hasMessageNotContaining("more returned");

      // Redelivered with the update left out, the batch goes through.
      sink.handle(change(1, Operation.INSERT), FENCE);
      sink.handle(change(3, Operation.INSERT), FENCE);
      sink.flush(FENCE);
    }
  }
}
