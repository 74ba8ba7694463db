package dev.sluice.testkit.kafka;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

class EmbeddedKafkaTest {

  @Test
  void recordsSurviveABrokerRestartOnTheSamePort() throws Exception {
    try (EmbeddedKafka kafka = EmbeddedKafka.start()) {
      kafka.createTopic("t", 1);
      Properties p = new Properties();
      p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
      p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
      p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
      try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
        producer.send(new ProducerRecord<>("t", "k", "before")).get();
        kafka.stopBroker();
        kafka.startBroker();
        producer.send(new ProducerRecord<>("t", "k", "after")).get();
      }
      assertThat(kafka.readAll("t", 2, Duration.ofSeconds(20)))
          .extracting(r -> new String(r.value()))
          .containsExactly("before", "after");
    }
  }
}
