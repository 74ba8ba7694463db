package dev.sluice.testkit.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.net.FaultProxy.Direction;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

/**
 * The embedded broker started behind a fault proxy advertises the proxy's address: a producer that
 * bootstrapped through the proxy and then learned the partition leader from the metadata still
 * sends through it (a broker advertising its own address would be reached around the proxy after
 * the first metadata answer, and a blackhole would not stop the produce). The second listener
 * answers the test around the blackhole.
 */
class EmbeddedKafkaBehindProxyTest {

  @Test
  void everyProduceGoesThroughTheAdvertisedProxyAndABlackholeStopsIt() throws Exception {
    try (EmbeddedKafka kafka = EmbeddedKafka.startBehindProxy(Duration.ofMinutes(5))) {
      FaultProxy proxy = kafka.proxy();
      assertThat(kafka.bootstrapServers()).isEqualTo(proxy.address());
      kafka.createTopic("t", 1);
      Properties p = new Properties();
      p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
      p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
      p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
        producer.send(new ProducerRecord<>("t", "k", "before")).get(20, TimeUnit.SECONDS);
        long up = proxy.bytesForwarded(Direction.UPSTREAM);
        long down = proxy.bytesForwarded(Direction.DOWNSTREAM);
        assertThat(up).isPositive();
        assertThat(down).isPositive();

        proxy.blackhole(Duration.ofSeconds(20));
        Future<RecordMetadata> held = producer.send(new ProducerRecord<>("t", "k", "held"));
        assertThatThrownBy(() -> held.get(2, TimeUnit.SECONDS))
            .as("a produce while the proxy is blackholed is not acknowledged")
            .isInstanceOf(TimeoutException.class);
        assertThat(proxy.bytesForwarded(Direction.UPSTREAM)).isEqualTo(up);
        assertThat(readDirect(kafka)).as("the second listener answers around the blackhole").containsExactly("before");

        proxy.pass();
        assertThat(held.get(20, TimeUnit.SECONDS).offset()).isEqualTo(1);
        assertThat(proxy.bytesForwarded(Direction.UPSTREAM)).isGreaterThan(up);
        assertThat(proxy.bytesForwarded(Direction.DOWNSTREAM)).isGreaterThan(down);
      }
      assertThat(kafka.readAll("t", 2, Duration.ofSeconds(20)))
          .extracting(r -> new String(r.value()))
          .containsExactly("before", "held");
    }
  }

  private static List<String> readDirect(EmbeddedKafka kafka) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.directBootstrapServers());
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
    List<String> out = new ArrayList<>();
    try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
      List<TopicPartition> parts = List.of(new TopicPartition("t", 0));
      c.assign(parts);
      c.seekToBeginning(parts);
      long end = c.endOffsets(parts).get(parts.get(0));
      while (c.position(parts.get(0)) < end) {
        c.poll(Duration.ofMillis(100)).forEach(r -> out.add(r.value()));
      }
    }
    return out;
  }
}
