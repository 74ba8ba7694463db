package dev.sluice.testkit.amqp;

import static org.assertj.core.api.Assertions.assertThat;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.GetResponse;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class EmbeddedAmqpBrokerTest {

  @Test
  void confirmsPublishesAndKeepsTopologyAcrossARestart() throws Exception {
    try (EmbeddedAmqpBroker broker = EmbeddedAmqpBroker.start()) {
      broker.declareQueue("x", "q", "#");
      broker.stop();
      broker.startBroker();
      try (Connection c = broker.connectionFactory().newConnection();
          Channel ch = c.createChannel()) {
        ch.confirmSelect();
        ch.basicPublish("x", "a.b", true, null, "hello".getBytes(StandardCharsets.UTF_8));
        assertThat(ch.waitForConfirms(10_000)).isTrue();
        GetResponse r = ch.basicGet("q", true);
        assertThat(r).isNotNull();
        assertThat(new String(r.getBody(), StandardCharsets.UTF_8)).isEqualTo("hello");
      }
    }
  }
}
