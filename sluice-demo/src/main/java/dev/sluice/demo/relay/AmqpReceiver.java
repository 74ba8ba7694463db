package dev.sluice.demo.relay;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.DefaultConsumer;
import com.rabbitmq.client.Envelope;
import dev.sluice.SluiceException;
import dev.sluice.testkit.amqp.EmbeddedAmqpBroker;
import java.io.IOException;

/**
 * Consumes the demo queue with manual acknowledgements and hands each message to the {@link
 * InboxConsumer}; a message is acknowledged only after the inbox processed it. If one cannot be
 * processed, it is left unacknowledged (the broker keeps it) and consuming stops; the demo then
 * reports the failure.
 */
final class AmqpReceiver implements AutoCloseable {
  private final Connection connection;
  private final Channel channel;

  AmqpReceiver(EmbeddedAmqpBroker broker, InboxConsumer target) {
    try {
      this.connection = broker.connectionFactory().newConnection("relay-demo-consumer");
      this.channel = connection.createChannel();
      channel.basicQos(200);
      channel.basicConsume(RelayDemo.QUEUE, false, new DefaultConsumer(channel) {
        @Override
        public void handleDelivery(String consumerTag, Envelope envelope, AMQP.BasicProperties properties,
            byte[] body) throws IOException {
          try {
            target.accept(body);
          } catch (RuntimeException e) {
            getChannel().basicCancel(consumerTag); // InboxConsumer recorded the failure
            return;
          }
          getChannel().basicAck(envelope.getDeliveryTag(), false);
        }
      });
    } catch (IOException | java.util.concurrent.TimeoutException e) {
      throw new SluiceException("Cannot consume queue " + RelayDemo.QUEUE + ": " + e, e);
    }
  }

  @Override
  public void close() {
    try {
      connection.close(5_000);
    } catch (IOException | RuntimeException e) {
      // the demo is finishing; the connection may already be gone
    }
  }
}
