package dev.sluice.kafka;

import dev.sluice.ConfigurationException;
import dev.sluice.sink.BrokerSink;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.internal.AbstractBrokerSink;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Function;
import org.apache.kafka.clients.producer.ProducerConfig;

/**
 * A {@link BrokerSink} that publishes changes to Kafka, in order per document key. {@link #handle}
 * sends asynchronously (the producer batches); {@link #flush} waits until the broker acknowledged
 * every record sent so far ({@code acks=all}, idempotent producer). A record the broker refuses for
 * good (too large, invalid topic) fails the flush, and its change is then refused by {@code handle}
 * when delivered again (ADR 0041).
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
 */
public interface KafkaSink<D> extends BrokerSink<D> {

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
    private Duration flushTimeout = AbstractBrokerSink.DEFAULT_FLUSH_TIMEOUT;

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
      this.flushTimeout = AbstractBrokerSink.requireFlushTimeout(flushTimeout);
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
