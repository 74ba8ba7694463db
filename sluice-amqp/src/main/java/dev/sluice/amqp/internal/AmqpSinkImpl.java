package dev.sluice.amqp.internal;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.amqp.AmqpSink;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.listener.Fence;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.MessageEncodingException;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.SinkException;
import java.io.IOException;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** See {@link AmqpSink}; decisions in {@code docs/adr/0041-sink-acknowledgement.md}. */
public final class AmqpSinkImpl<D> implements AmqpSink<D> {
  private static final Logger LOG = LoggerFactory.getLogger(AmqpSink.class);

  private final ConnectionFactory factory;
  private final String exchange;
  private final MessageEncoder<D> encoder;
  private final Function<? super OutboundMessage<D>, String> routingKey;
  private final Duration flushTimeout;
  private final int maxMessageBytes;
  private final Map<String, Lane> lanes = new ConcurrentHashMap<>();
  private final Object connectionLock = new Object();
  private Connection connection;
  private volatile boolean closed;

  public AmqpSinkImpl(
      ConnectionFactory factory,
      String exchange,
      MessageEncoder<D> encoder,
      Function<? super OutboundMessage<D>, String> routingKey,
      Duration flushTimeout,
      int maxMessageBytes) {
    // Our own copy: the sink reconnects itself after a failed flush, so the client's automatic
    // recovery (which would replay publishes on a new channel behind our back) is off.
    this.factory = factory.clone();
    this.factory.setAutomaticRecoveryEnabled(false);
    this.factory.setTopologyRecoveryEnabled(false);
    this.factory.setConnectionTimeout((int) Math.min(Integer.MAX_VALUE, flushTimeout.toMillis()));
    this.exchange = exchange;
    this.encoder = encoder;
    this.routingKey = routingKey;
    this.flushTimeout = flushTimeout;
    this.maxMessageBytes = maxMessageBytes;
  }

  @Override
  public void handle(ChangeEvent<D> event, Fence fence) {
    if (closed) {
      throw new SinkException("AMQP sink is closed");
    }
    List<OutboundMessage<D>> messages = encoder.encode(event, fence);
    Lane lane = lanes.computeIfAbsent(fence.lease(), l -> new Lane());
    for (OutboundMessage<D> m : messages) {
      String key;
      try {
        key = routingKey.apply(m);
      } catch (RuntimeException e) {
        throw new MessageEncodingException(event, "the routing key function threw", e);
      }
      if (key == null) {
        throw new MessageEncodingException(event, "the routing key function returned null", null);
      }
      if (m.body().length > maxMessageBytes) {
        throw new MessageEncodingException(
            event, "message " + m.id() + " is " + m.body().length + " bytes, more than maxMessageBytes " + maxMessageBytes, null);
      }
      if (lane.failure != null) {
        continue; // already failing: flush reports it and the listener redelivers
      }
      Map<String, Object> headers = new HashMap<>(m.headers());
      AMQP.BasicProperties props =
          new AMQP.BasicProperties.Builder()
              .deliveryMode(2)
              .contentType("application/json")
              .contentEncoding("utf-8")
              .messageId(m.id())
              .type(m.kind())
              .headers(headers)
              .build();
      try {
        lane.channel().basicPublish(exchange, key, true, props, m.body());
        lane.published++;
      } catch (IOException | RuntimeException | TimeoutException e) {
        // An outage is not the change's fault: fail the flush so delivery pauses, do not park.
        lane.failure = new SinkException(
            "AMQP publish of message " + m.id() + " of change " + event + " to exchange '" + exchange
                + "' failed: " + e, e);
      }
    }
  }

  @Override
  public void flush(Fence fence) {
    Lane lane = lanes.get(fence.lease());
    if (lane == null) {
      return;
    }
    SinkException failure = lane.failure;
    int published = lane.published;
    if (failure == null && lane.channel != null && published > 0) {
      try {
        if (!lane.channel.waitForConfirms(Math.max(1, flushTimeout.toMillis()))) {
          failure = new SinkException("AMQP broker negatively acknowledged (nack) at least one of "
              + published + " messages to exchange '" + exchange + "'");
        }
      } catch (TimeoutException e) {
        failure = new SinkException(
            "AMQP broker did not confirm " + published + " messages within " + flushTimeout, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        failure = new SinkException("Interrupted while waiting for AMQP confirms", e);
      } catch (RuntimeException e) {
        failure = new SinkException("AMQP channel failed while waiting for confirms: " + e, e);
      }
      // A returned message explains a nack better than the nack itself (Qpid nacks unroutable
      // mandatory messages, RabbitMQ acks them after the return): report the return.
      Returned r = lane.returned.poll();
      if (r != null) {
        failure = new SinkException(
            "AMQP broker returned message " + r.messageId + " as unroutable: exchange '" + exchange
                + "', routing key '" + r.routingKey + "': " + r.replyCode + " " + r.replyText
                + " (bind a queue to it)");
      }
    }
    lane.published = 0;
    if (failure != null) {
      LOG.warn("AMQP flush failed for {}: {}", fence.lease(), failure.getMessage());
      lane.reset();
      throw failure;
    }
  }

  private Connection connection() throws IOException, TimeoutException {
    synchronized (connectionLock) {
      if (closed) {
        throw new IllegalStateException("AMQP sink is closed");
      }
      if (connection == null || !connection.isOpen()) {
        if (connection != null) {
          connection.abort();
        }
        connection = factory.newConnection("sluice-amqp-sink");
      }
      return connection;
    }
  }

  @Override
  public void close() {
    closed = true;
    lanes.values().forEach(Lane::reset);
    synchronized (connectionLock) {
      if (connection != null) {
        connection.abort((int) Math.min(Integer.MAX_VALUE, flushTimeout.toMillis()));
        connection = null;
      }
    }
  }

  private record Returned(String messageId, String routingKey, int replyCode, String replyText) {}

  /** One partition's channel; used by that partition's thread only. */
  private final class Lane {
    Channel channel;
    SinkException failure;
    int published;
    final Queue<Returned> returned = new ConcurrentLinkedQueue<>();

    Channel channel() throws IOException, TimeoutException {
      if (channel == null || !channel.isOpen()) {
        reset();
        Channel c = connection().createChannel();
        c.confirmSelect();
        c.addReturnListener(
            ret -> returned.add(new Returned(
                ret.getProperties().getMessageId(), ret.getRoutingKey(), ret.getReplyCode(), ret.getReplyText())));
        channel = c;
      }
      return channel;
    }

    void reset() {
      failure = null;
      published = 0;
      returned.clear();
      Channel c = channel;
      channel = null;
      if (c != null) {
        try {
          c.abort();
        } catch (IOException | RuntimeException e) {
          LOG.debug("Ignoring error while aborting AMQP channel", e);
        }
      }
    }
  }
}
