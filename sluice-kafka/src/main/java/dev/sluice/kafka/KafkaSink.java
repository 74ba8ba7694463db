package dev.sluice.kafka;

import dev.sluice.ConfigurationException;
import dev.sluice.kafka.internal.KafkaSinkImpl;
import dev.sluice.listener.Handler;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.OutboundMessage;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import org.apache.kafka.clients.producer.ProducerConfig;

/**
 * A {@link Handler} that publishes changes to Kafka, at least once and in order per document
 * key. {@link #handle} sends asynchronously (the producer batches); {@link #flush} waits until
 * the broker acknowledged every record sent so far ({@code acks=all}, idempotent producer), so
 * the listener's checkpoint never passes an unacknowledged change. If the broker is down or
 * times out, {@code flush} throws a {@link dev.sluice.sink.SinkException} and the listener
 * redelivers from the last checkpoint: delivery pauses, nothing is lost or reordered, duplicates
 * are possible (consumers de-duplicate on the {@code sluice-id} header, see the inbox).
 *
 * <pre>{@code
 * KafkaSink<BsonDocument> sink = KafkaSink.builder("localhost:9092", "orders",
 *         MessageEncoder.builder(DocumentMapper.<BsonDocument>bson()).build())
 *     .build();
 * Listener.builder(feed, leases).group("kafka-relay").handler(sink).build().start();
 * }</pre>
 *
 * <p>Record key: {@link dev.sluice.feed.ChangeEvent#key()} (UTF-8), so one document's messages
 * land in one partition. Headers: see {@link dev.sluice.sink.Envelope}. Value: the envelope.
 *
 * <p>Thread-safe: one sink may serve every partition of a listener; each partition ({@link
 * dev.sluice.listener.Fence#lease()}) has its own pending set.
 */
public interface KafkaSink<D> extends Handler<D>, AutoCloseable {

  /**
   * False: the sink overlaps its sends itself and keeps one partition's changes in one sequence, so a
   * listener refuses {@code concurrency} above 1 for it.
   */
  @Override
  default boolean concurrentCalls() {
    return false;
  }

  /**
   * Publishes the change's messages asynchronously.
   *
   * @throws dev.sluice.sink.MessageEncodingException if the change cannot be encoded (or is too
   *     large); the listener's failure policy retries and parks it
   * @throws dev.sluice.sink.MessageRejectedException if the broker refused this change for good
   *     on an earlier delivery
   */
  @Override
  void handle(dev.sluice.feed.ChangeEvent<D> event, dev.sluice.listener.Fence fence);

  /**
   * Waits until the broker acknowledged every message published for {@code fence.lease()}.
   *
   * @throws dev.sluice.sink.SinkException if any was not acknowledged in time or refused; the
   *     listener then redelivers from its last checkpoint
   */
  @Override
  void flush(dev.sluice.listener.Fence fence);

  /**
   * Closes the producer, waiting up to the flush timeout for records in flight (then dropping
   * them: they were not acknowledged, so no checkpoint covers them). Returns within the flush
   * timeout even when the broker does not answer.
   */
  @Override
  void close();

  static <D> Builder<D> builder(String bootstrapServers, String topic, MessageEncoder<D> encoder) {
    return new Builder<D>(encoder)
        .bootstrapServers(bootstrapServers)
        .topic(topic);
  }

  /** Builder. Every setter validates and throws {@link ConfigurationException}. */
  final class Builder<D> {
    /** Producer settings the sink's guarantees depend on; they cannot be overridden. */
    private static final Set<String> FIXED =
        Set.of(
            ProducerConfig.ACKS_CONFIG,
            ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
            ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
            ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
            ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION,
            ProducerConfig.RETRIES_CONFIG,
            ProducerConfig.TRANSACTIONAL_ID_CONFIG);

    private final MessageEncoder<D> encoder;
    private final Map<String, Object> producerConfig = new HashMap<>();
    private Function<? super OutboundMessage<D>, String> topic;
    private Duration flushTimeout = Duration.ofSeconds(30);

    private Builder(MessageEncoder<D> encoder) {
      this.encoder = ConfigurationException.requireNonNull(encoder, "encoder");
      // flush() marks the batch boundary, and the producer still batches whatever accumulates
      // while requests are in flight; lingering only delays each flush (measured in
      // docs/benchmarks.md: 10x slower with per-change checkpoints at linger.ms=5).
      producerConfig.put(ProducerConfig.LINGER_MS_CONFIG, 0);
      producerConfig.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
    }

    public Builder<D> bootstrapServers(String servers) {
      ConfigurationException.requireNonNull(servers, "bootstrapServers");
      ConfigurationException.require(!servers.isBlank(), "bootstrapServers", "'" + servers + "'", "must not be blank");
      producerConfig.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, servers);
      return this;
    }

    /** One topic for every message. */
    public Builder<D> topic(String topic) {
      ConfigurationException.requireNonNull(topic, "topic");
      ConfigurationException.require(!topic.isBlank(), "topic", "'" + topic + "'", "must not be blank");
      this.topic = m -> topic;
      return this;
    }

    /** The topic per message, for example by stream or domain event type. */
    public Builder<D> topic(Function<? super OutboundMessage<D>, String> topic) {
      this.topic = ConfigurationException.requireNonNull(topic, "topic");
      return this;
    }

    /**
     * How long {@link KafkaSink#flush} waits for acknowledgements before it fails (and the
     * listener redelivers). Also bounds how long {@code handle} may block for metadata. Default
     * 30 s.
     */
    public Builder<D> flushTimeout(Duration flushTimeout) {
      ConfigurationException.requireNonNull(flushTimeout, "flushTimeout");
      ConfigurationException.require(
          !flushTimeout.isNegative() && !flushTimeout.isZero(), "flushTimeout", flushTimeout, "must be positive");
      this.flushTimeout = flushTimeout;
      return this;
    }

    /**
     * Any other producer setting (batch.size, linger.ms, compression.type, security ...). The
     * settings the guarantees rest on ({@code acks=all}, idempotence, serializers, retries,
     * in-flight requests, transactions) are fixed and rejected here.
     */
    public Builder<D> producerProperty(String name, Object value) {
      ConfigurationException.requireNonNull(name, "producer property name");
      ConfigurationException.requireNonNull(value, "producer property " + name);
      ConfigurationException.require(
          !FIXED.contains(name), "producer property " + name, value, "is fixed by the sink (acks=all, idempotent producer)");
      producerConfig.put(name, value);
      return this;
    }

    public KafkaSink<D> build() {
      Objects.requireNonNull(topic, "topic");
      if (!producerConfig.containsKey(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG)) {
        throw new ConfigurationException("bootstrapServers must be set");
      }
      return new KafkaSinkImpl<>(encoder, topic, flushTimeout, Map.copyOf(producerConfig));
    }
  }
}
