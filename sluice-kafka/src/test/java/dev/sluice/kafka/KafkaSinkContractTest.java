package dev.sluice.kafka;

import dev.sluice.listener.Handler;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.sink.SinkContract;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

class KafkaSinkContractTest extends SinkContract {
  private static final int PARTITIONS = 3;
  private static EmbeddedKafka kafka;

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

  @Override
  protected void prepare(String destination) {
    kafka.createTopic(destination, PARTITIONS);
  }

  @Override
  protected Handler<BsonDocument> newSink(
      String destination, MessageEncoder<BsonDocument> encoder, Duration flushTimeout) {
    return KafkaSink.builder(kafka.bootstrapServers(), destination, encoder)
        .flushTimeout(flushTimeout)
        .producerProperty("request.timeout.ms", (int) Math.min(flushTimeout.toMillis(), 30_000))
        .build();
  }

  @Override
  protected List<Received> received(String destination, int atLeast, Duration timeout) {
    return kafka.readAll(destination, atLeast, timeout).stream()
        .map(r -> {
          Map<String, String> headers = new HashMap<>();
          for (Header h : r.headers()) {
            headers.put(h.key(), new String(h.value(), StandardCharsets.UTF_8));
          }
          return new Received(new String(r.key(), StandardCharsets.UTF_8), headers, r.value());
        })
        .collect(Collectors.toList());
  }

  @Override
  protected long storedAtBroker(String destination) {
    try (Admin admin = kafka.admin()) {
      Map<TopicPartition, OffsetSpec> request =
          IntStream.range(0, PARTITIONS)
              .boxed()
              .collect(Collectors.toMap(p -> new TopicPartition(destination, p), p -> OffsetSpec.latest()));
      return admin.listOffsets(request).all().get().values().stream().mapToLong(o -> o.offset()).sum();
    } catch (Exception e) {
      throw new IllegalStateException("Cannot read offsets of " + destination, e);
    }
  }

  @Override
  protected int messageSizeLimit() {
    return 1_048_576; // the producer's default max.request.size
  }

  @Override
  protected void stopBroker() {
    kafka.stopBroker();
  }

  @Override
  protected void startBroker() {
    kafka.startBroker();
  }
}
