package dev.sluice.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.listener.Fence;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.Envelope;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.MessageRejectedException;
import dev.sluice.sink.SinkException;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import org.bson.BsonDocument;
import org.bson.BsonString;
import org.junit.jupiter.api.Test;

class KafkaSinkRejectionTest {

  private static ChangeEvent<BsonDocument> change(String key, int n, String payload) {
    return new ChangeEvent<>("chg-" + n, "shop.orders", Position.of("tok-" + n), Operation.INSERT, key,
        new BsonDocument("_id", new BsonString(key)),
        new BsonDocument("_id", new BsonString(key)).append("payload", new BsonString(payload)), null, null);
  }

  @Test
  void aRecordTheBrokerRefusesForGoodFailsTheFlushThenItsRedeliveryFailsInHandleSoItCanBeParked() {
    try (EmbeddedKafka kafka = EmbeddedKafka.start()) {
      // The topic accepts less than the producer may send: only the broker can refuse it.
      kafka.createTopic("small", 1, Map.of("max.message.bytes", "20000"));
      Fence fence = new Fence("shop.orders#0", "n1", 1);
      try (KafkaSink<BsonDocument> sink =
          KafkaSink.builder(kafka.bootstrapServers(), "small",
                  MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
              .flushTimeout(Duration.ofSeconds(10))
              .build()) {
        ChangeEvent<BsonDocument> big = change("a", 1, "x".repeat(50_000));
        sink.handle(big, fence);
        assertThatThrownBy(() -> sink.flush(fence))
            .isInstanceOf(SinkException.class)
            .hasMessageContaining("chg-1");

        // The listener redelivers from the checkpoint: the refused change now fails in handle,
        // where the failure policy retries and parks it, and the changes after it flow.
        assertThatThrownBy(() -> sink.handle(big, fence))
            .isInstanceOf(MessageRejectedException.class)
            .hasMessageContaining("chg-1")
            .hasMessageContaining("tok-1")
            .hasMessageContaining("RecordTooLarge");
        sink.handle(change("b", 2, "small"), fence);
        sink.flush(fence);
      }
      assertThat(kafka.readAll("small", 1, Duration.ofSeconds(10)))
          .extracting(r -> new String(r.headers().lastHeader(Envelope.HEADER_ID).value(), StandardCharsets.UTF_8))
          .containsExactly("chg-2");
    }
  }

  @Test
  void settingsTheGuaranteesRestOnCannotBeOverridden() {
    MessageEncoder<BsonDocument> enc = MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build();
    assertThatThrownBy(() -> KafkaSink.builder("localhost:9092", "t", enc).producerProperty("acks", "1"))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("acks");
    assertThatThrownBy(() -> KafkaSink.builder("localhost:9092", "t", enc).producerProperty("enable.idempotence", false))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("enable.idempotence");
    assertThatThrownBy(() -> KafkaSink.builder(" ", "t", enc))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("bootstrapServers");
    assertThatThrownBy(() -> KafkaSink.builder("localhost:9092", "t", enc).flushTimeout(Duration.ZERO))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("flushTimeout");
  }
}
