package dev.sluice.amqp;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.SinkException;
import dev.sluice.sink.internal.AbstractBrokerSink;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * See {@link AmqpSink}; decisions in {@code docs/adr/0041-sink-acknowledgement.md} and, for how a
 * returned message is matched to its confirm, {@code docs/adr/0046-amqp-return-correlation.md}.
 */
final class AmqpSinkImpl<D>
    extends AbstractBrokerSink<D, AmqpSinkImpl.Publish, AmqpSinkImpl<D>.Lane>
    implements AmqpSink<D> {
  private static final Logger LOG = LoggerFactory.getLogger(AmqpSink.class);

  /**
   * Points in the confirm and return handling where a test can hold a thread to force an
   * interleaving (the default does nothing). Not an extension point.
   */
  interface Probe {
    /** On the client's reader thread, before a returned message is recorded. */
    default void returnArriving(String messageId) {}

    /** On the flushing thread, once every confirm arrived and before returns are read. */
    default void confirmsSettled(boolean allAcked) {}
  }

  private static final Probe NO_PROBE = new Probe() {};

  private final Probe probe;

  private final ConnectionFactory factory;
  private final String exchange;
  private final Function<? super OutboundMessage<D>, String> routingKey;
  private final int maxMessageBytes;
  /** Guarded by {@link #clientLock}. */
  private Connection connection;

  public AmqpSinkImpl(
      ConnectionFactory factory,
      String exchange,
      MessageEncoder<D> encoder,
      Function<? super OutboundMessage<D>, String> routingKey,
      Duration flushTimeout,
      int maxMessageBytes) {
    this(factory, exchange, encoder, routingKey, flushTimeout, maxMessageBytes, NO_PROBE);
  }

  AmqpSinkImpl(
      ConnectionFactory factory,
      String exchange,
      MessageEncoder<D> encoder,
      Function<? super OutboundMessage<D>, String> routingKey,
      Duration flushTimeout,
      int maxMessageBytes,
      Probe probe) {
    super("AMQP", AmqpSink.class, encoder, flushTimeout);
    this.probe = probe;
    // Our own copy: the sink reconnects itself after a failed flush, so the client's automatic
    // recovery (which would replay publishes on a new channel behind our back) is off.
    this.factory = factory.clone();
    this.factory.setAutomaticRecoveryEnabled(false);
    this.factory.setTopologyRecoveryEnabled(false);
    // Every wait on the broker bounded by the flush timeout (ADR 0105): the TCP connect, the
    // handshake (default 10 s), and each channel RPC, among them opening a channel, confirm.select
    // and the close a channel's abort still waits for (default 10 minutes: a blackholed broker
    // held a failed flush, and close, that long).
    int bound = (int) Math.max(1, Math.min(Integer.MAX_VALUE, flushTimeout.toMillis()));
    this.factory.setConnectionTimeout(bound);
    this.factory.setHandshakeTimeout(bound);
    this.factory.setChannelRpcTimeout(bound);
    this.exchange = exchange;
    this.routingKey = routingKey;
    this.maxMessageBytes = maxMessageBytes;
  }

  @Override
  protected Lane newLane() {
    return new Lane();
  }

  @Override
  protected Publish prepare(ChangeEvent<D> event, OutboundMessage<D> m) {
    String key = destination(event, m, routingKey, "routing key", true);
    requireSize(event, m, m.body().length, false, "maxMessageBytes", maxMessageBytes);
    AMQP.BasicProperties props =
        new AMQP.BasicProperties.Builder()
            .deliveryMode(2)
            .contentType("application/json")
            .contentEncoding("utf-8")
            .messageId(m.id())
            .type(m.kind())
            .headers(new HashMap<>(m.headers()))
            .build();
    return new Publish(key, props);
  }

  @Override
  protected void send(Lane lane, OutboundMessage<D> m, Publish publish) {
    try {
      Channel channel = lane.channel();
      lane.unconfirmed.put(channel.getNextPublishSeqNo(), m.id());
      channel.basicPublish(exchange, publish.routingKey, true, publish.properties, m.body());
      lane.published++;
    } catch (IOException | RuntimeException | TimeoutException e) {
      // An outage is not the change's fault: fail the flush so delivery pauses, do not park.
      // The connection failed or did not answer in time (opening a channel, confirm.select):
      // it is dropped at once, so no later call waits on it again.
      abandonConnection();
      throw new SinkException(
          "AMQP publish of " + describe(m) + " to exchange '" + exchange + "' failed: " + e
              + (e.getCause() != null && e.getCause() != e ? " (caused by " + e.getCause() + ")" : ""), e);
    }
  }

  /** Waits for the publisher confirms on the calling thread; the stage returned is complete. */
  @Override
  protected CompletionStage<Void> acknowledged(String lease, Lane lane) {
    SinkException failure = lane.failure();
    boolean connectionSuspect = failure != null;
    int published = lane.published;
    if (failure == null && lane.channel != null && published > 0) {
      Channel channel = lane.channel;
      try {
        boolean allAcked = channel.waitForConfirms(Math.max(1, flushTimeout.toMillis()));
        probe.confirmsSettled(allAcked);
        if (!allAcked) {
          // Qpid sends basic.nack BEFORE basic.return for an unroutable mandatory message, and
          // waitForConfirms wakes up on the nack: the return may still be on the wire. Any
          // synchronous method on this channel is answered after the broker wrote the return,
          // and the client runs return listeners on its reader thread in frame order, so once
          // this round trip completes every return for the nacked messages is recorded.
          // (RabbitMQ sends the return before the ack or nack: nothing to wait for there.)
          channel.basicQos(0);
          failure = nacked(lane, published);
        }
      } catch (TimeoutException e) {
        connectionSuspect = true;
        failure = new SinkException(
            "AMQP broker did not confirm " + published + " messages within " + flushTimeout, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        connectionSuspect = true;
        failure = new SinkException("Interrupted while waiting for AMQP confirms", e);
      } catch (IOException | RuntimeException e) {
        connectionSuspect = true;
        failure = new SinkException("AMQP channel failed while waiting for confirms: " + e, e);
      }
      // A returned message explains a failure better than the nack itself (Qpid nacks
      // unroutable mandatory messages, RabbitMQ acks them after the return): report the return,
      // preferring one whose publish was nacked.
      Returned r = lane.firstReturn();
      if (r != null) {
        int more = lane.returned.size() - 1;
        failure = new SinkException(
            "AMQP broker returned message " + r.messageId + " as unroutable: exchange '" + exchange
                + "', routing key '" + r.routingKey + "': " + r.replyCode + " " + r.replyText
                + (more > 0 ? " (and " + more + " more returned messages)" : "")
                + " (bind a queue to it)");
      }
    }
    lane.published = 0;
    if (failure != null) {
      if (connectionSuspect) {
        // Not a refusal by a broker that answers (nack, return): the broker did not answer in
        // time or the connection failed. Drop the connection without waiting for it, so that
        // closing this lane's channel, and the other lanes' calls, do not wait on it either.
        abandonConnection();
      }
      lane.reset();
      throw failure;
    }
    return CompletableFuture.completedFuture(null);
  }

  private SinkException nacked(Lane lane, int published) {
    List<String> ids = new ArrayList<>(lane.nacked.values());
    String which = ids.isEmpty() ? "at least one of " + published + " messages"
        : (ids.size() == 1 ? "message " : ids.size() + " of " + published + " messages: ")
            + String.join(", ", ids.subList(0, Math.min(ids.size(), 10)))
            + (ids.size() > 10 ? ", ..." : "");
    return new SinkException(
        "AMQP broker negatively acknowledged (nack) " + which + " to exchange '" + exchange + "'");
  }

  /**
   * Closes the shared connection at once: the close frame is sent, its answer not awaited (the
   * broker did not answer in time already). Every lane's channel closes with it; their next flush
   * fails and the listener delivers again from the checkpoint.
   */
  private void abandonConnection() {
    abortConnection(1);
  }

  /**
   * Takes the shared connection away (the next {@link #connection()} opens a new one) and aborts it, waiting up to
   * {@code timeoutMillis} for the broker's answer to the close.
   */
  private void abortConnection(int timeoutMillis) {
    Connection c;
    synchronized (clientLock) {
      c = connection;
      connection = null;
    }
    if (c != null) {
      c.abort(timeoutMillis);
    }
  }

  private Connection connection() throws IOException, TimeoutException {
    synchronized (clientLock) {
      if (closed()) {
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
  protected void closeClient() {
    // The connection first, waiting up to the flush timeout for the broker's answer: then the
    // channels are closed already and closing them (closed(lane)) waits for nothing (each would
    // otherwise wait up to the flush timeout for a broker that does not answer).
    abortConnection((int) Math.max(1, Math.min(Integer.MAX_VALUE, flushTimeout.toMillis())));
  }

  @Override
  protected void closed(Lane lane) {
    lane.reset();
  }

  /** A message's routing key and properties, checked and ready to publish. */
  record Publish(String routingKey, AMQP.BasicProperties properties) {}

  private record Returned(String messageId, String routingKey, int replyCode, String replyText) {}

  /** One partition's channel; used by that partition's thread only (listeners aside). */
  final class Lane extends AbstractBrokerSink.Lane {
    Channel channel;
    int published;
    /** Publish sequence number to message id, until confirmed; the reader thread removes. */
    final NavigableMap<Long, String> unconfirmed = new ConcurrentSkipListMap<>();
    /** Nacked publishes (sequence number to message id) since the last flush. */
    final NavigableMap<Long, String> nacked = new ConcurrentSkipListMap<>();
    /** Returned messages, recorded on the reader thread in the order the broker sent them. */
    final Queue<Returned> returned = new ConcurrentLinkedQueue<>();

    Channel channel() throws IOException, TimeoutException {
      if (channel == null || !channel.isOpen()) {
        reset();
        Channel c = connection().createChannel();
        c.confirmSelect();
        c.addReturnListener(ret -> {
          String id = ret.getProperties().getMessageId();
          probe.returnArriving(id);
          returned.add(new Returned(id, ret.getRoutingKey(), ret.getReplyCode(), ret.getReplyText()));
        });
        c.addConfirmListener(
            (tag, multiple) -> settle(tag, multiple, null),
            (tag, multiple) -> settle(tag, multiple, nacked));
        channel = c;
      }
      return channel;
    }

    private void settle(long tag, boolean multiple, Map<Long, String> into) {
      Map<Long, String> settled = multiple ? unconfirmed.headMap(tag, true) : unconfirmed.subMap(tag, true, tag, true);
      if (into != null) {
        into.putAll(settled);
      }
      settled.clear();
    }

    /** The first return of a nacked publish, else the first return, else null. */
    Returned firstReturn() {
      for (Returned r : returned) {
        if (nacked.containsValue(r.messageId)) {
          return r;
        }
      }
      return returned.peek();
    }

    void reset() {
      takeFailure();
      published = 0;
      returned.clear();
      unconfirmed.clear();
      nacked.clear();
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
