package dev.sluice.amqp;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.SinkException;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import java.time.Duration;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Misconfigured topology is reported clearly and pauses delivery instead of losing messages. */
class AmqpSinkTopologyErrorsTest {
  private static EmbeddedAmqpBroker broker;
  private static final Fence FENCE = new Fence("shop.orders#0", "n1", 1);

  @BeforeAll
  static void start() {
    broker = EmbeddedAmqpBroker.start();
  }

  @AfterAll
  static void stop() {
    broker.close();
  }

  private static ChangeEvent<BsonDocument> change(int n) {
    return new ChangeEvent<>("chg-" + n, "shop.orders", Position.of("tok-" + n), Operation.INSERT, "k",
        new BsonDocument("_id", new BsonString("k")), new BsonDocument("_id", new BsonString("k")), null, null);
  }

  private static AmqpSink<BsonDocument> sink(String exchange) {
    return AmqpSink.builder(broker.connectionFactory(), exchange,
            MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
        .flushTimeout(Duration.ofSeconds(5))
        .build();
  }

  @Test
  void aMissingExchangeFailsTheFlushNamingIt() {
    try (AmqpSink<BsonDocument> sink = sink("no-such-exchange")) {
      sink.handle(change(1), FENCE);
      assertThatThrownBy(() -> sink.flush(FENCE))
          .isInstanceOf(SinkException.class)
          .hasMessageContaining("no-such-exchange");
    }
  }

  @Test
  void anUnroutableMessageFailsTheFlushUntilAQueueIsBoundThenGoesThrough() throws Exception {
    try (Connection c = broker.connectionFactory().newConnection(); Channel ch = c.createChannel()) {
      ch.exchangeDeclare("unbound", "topic", true);
    }
    try (AmqpSink<BsonDocument> sink = sink("unbound")) {
      sink.handle(change(1), FENCE);
      assertThatThrownBy(() -> sink.flush(FENCE))
          .isInstanceOf(SinkException.class)
          .hasMessageContaining("unroutable")
          .hasMessageContaining("shop.orders.insert")
          .hasMessageContaining("chg-1");

      broker.declareQueue("unbound", "late-queue", "#");
      sink.handle(change(1), FENCE); // the listener redelivers
      sink.flush(FENCE);
    }
    try (Connection c = broker.connectionFactory().newConnection(); Channel ch = c.createChannel()) {
      assertThat(ch.queueDeclarePassive("late-queue").getMessageCount()).isEqualTo(1);
    }
  }

  @Test
  void builderRejectsBadValuesNamingThem() {
    MessageEncoder<BsonDocument> enc = MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build();
    assertThatThrownBy(() -> AmqpSink.builder(broker.connectionFactory(), "x", enc).maxMessageBytes(0))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("maxMessageBytes");
    assertThatThrownBy(() -> AmqpSink.builder(null, "x", enc))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("connectionFactory");
    assertThatThrownBy(() -> AmqpSink.builder(broker.connectionFactory(), "x", enc).flushTimeout(Duration.ofSeconds(-1)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("flushTimeout");
  }
}
