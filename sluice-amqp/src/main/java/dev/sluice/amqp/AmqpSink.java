package dev.sluice.amqp;

import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.ConfigurationException;
import dev.sluice.sink.BrokerSink;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.internal.AbstractBrokerSink;
import java.time.Duration;
import java.util.Locale;
import java.util.function.Function;

/**
 * A {@link BrokerSink} that publishes changes to an AMQP 0-9-1 exchange (RabbitMQ, Qpid), in order
 * per partition. Messages are persistent ({@code delivery-mode 2}) and mandatory; the channel is in
 * publisher-confirm mode. {@link #handle} publishes; {@link #flush} waits until the broker confirmed
 * every message published so far. Besides an outage, a negative confirm or an unroutable (returned)
 * message make {@code flush} throw {@link dev.sluice.sink.SinkException}, naming the exchange, the
 * routing key and the message.
 *
 * <pre>{@code
 * ConnectionFactory amqp = new ConnectionFactory();
 * amqp.setUri("amqp://guest:guest@localhost:5672");
 * AmqpSink<BsonDocument> sink = AmqpSink.builder(amqp, "orders",
 *         MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
 *     .build();
 * Listener.builder(feed, leases).group("amqp-relay").handler(sink).build().start();
 * }</pre>
 *
 * <p>Message properties: {@code message-id} = the envelope id, {@code type} = the kind, {@code
 * content-type application/json}, headers as in {@link dev.sluice.sink.Envelope}. The sink does
 * not declare the exchange or queues: topology belongs to the application (an undeclared
 * exchange fails every flush with a clear error, an unbound routing key is reported as
 * unroutable).
 *
 * <p>Each partition ({@link dev.sluice.listener.Fence#lease()}) gets its own channel on one shared
 * connection; the sink reconnects on the next change after a failed flush.
 *
 * <p>Bounded when the broker does not answer (a half-open connection, ADR 0105): {@code flush}
 * fails within the flush timeout; {@code handle} waits at most the flush timeout per step of
 * (re)connecting (TCP connect, handshake, opening a channel, {@code confirm.select}); {@code close}
 * returns within the flush timeout. A flush that fails because the broker did not answer drops the
 * shared connection, so every partition's next flush fails and is delivered again.
 */
public interface AmqpSink<D> extends BrokerSink<D> {

  static <D> Builder<D> builder(
      ConnectionFactory connectionFactory, String exchange, MessageEncoder<D> encoder) {
    return new Builder<>(connectionFactory, exchange, encoder);
  }

  /** Builder. Every setter validates and throws {@link ConfigurationException}. */
  final class Builder<D> {
    private final ConnectionFactory connectionFactory;
    private final String exchange;
    private final MessageEncoder<D> encoder;
    private Function<? super OutboundMessage<D>, String> routingKey =
        m -> m.source().stream() + "." + m.source().operation().name().toLowerCase(Locale.ROOT);
    private Duration flushTimeout = AbstractBrokerSink.DEFAULT_FLUSH_TIMEOUT;
    private int maxMessageBytes = 16 * 1024 * 1024;

    private Builder(ConnectionFactory connectionFactory, String exchange, MessageEncoder<D> encoder) {
      this.connectionFactory = ConfigurationException.requireNonNull(connectionFactory, "connectionFactory");
      this.exchange = ConfigurationException.requireNonNull(exchange, "exchange");
      this.encoder = ConfigurationException.requireNonNull(encoder, "encoder");
    }

    /**
     * The routing key per message. Default: {@code <stream>.<operation>} in lower case, such
     * as {@code shop.orders.update}.
     */
    public Builder<D> routingKey(Function<? super OutboundMessage<D>, String> routingKey) {
      this.routingKey = ConfigurationException.requireNonNull(routingKey, "routingKey");
      return this;
    }

    /**
     * How long {@code flush} waits for publisher confirms before failing; also the bound of every
     * other wait on the broker (connect, handshake, channel calls, close). Default 30 s.
     */
    public Builder<D> flushTimeout(Duration flushTimeout) {
      this.flushTimeout = AbstractBrokerSink.requireFlushTimeout(flushTimeout);
      return this;
    }

    /**
     * Largest message body; a larger one fails its change (parked by the failure policy)
     * instead of making the broker close the channel. Default 16 MiB.
     */
    public Builder<D> maxMessageBytes(int maxMessageBytes) {
      ConfigurationException.require(maxMessageBytes > 0, "maxMessageBytes", maxMessageBytes, "must be positive");
      this.maxMessageBytes = maxMessageBytes;
      return this;
    }

    public AmqpSink<D> build() {
      return new AmqpSinkImpl<>(connectionFactory, exchange, encoder, routingKey, flushTimeout, maxMessageBytes);
    }
  }
}
