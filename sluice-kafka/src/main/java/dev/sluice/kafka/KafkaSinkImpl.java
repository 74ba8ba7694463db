package dev.sluice.kafka;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Position;
import dev.sluice.sink.MessageEncoder;
import dev.sluice.sink.MessageRejectedException;
import dev.sluice.sink.OutboundMessage;
import dev.sluice.sink.SinkException;
import dev.sluice.sink.internal.AbstractBrokerSink;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** See {@link KafkaSink}; decisions in {@code docs/adr/0041-sink-acknowledgement.md}. */
final class KafkaSinkImpl<D>
    extends AbstractBrokerSink<D, ProducerRecord<byte[], byte[]>, KafkaSinkImpl.Pending>
    implements KafkaSink<D> {
  private static final Logger LOG = LoggerFactory.getLogger(KafkaSink.class);
  private static final int RECORD_OVERHEAD = 128;

  private final Function<? super OutboundMessage<D>, String> topic;
  private final Map<String, Object> config;
  private final int maxRequestSize;
  /**
   * Settles completed flushes: off the producer's I/O thread (whose callbacks complete them), and
   * off the JVM's common pool, because settling a failure closes the producer, which can block for
   * up to the flush timeout. One daemon thread per sink, stopped by {@link #close}.
   */
  private final ExecutorService settler = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "sluice-kafka-settle");
    t.setDaemon(true);
    return t;
  });
  /** Guarded by {@link #clientLock}. */
  private Producer<byte[], byte[]> producer;

  public KafkaSinkImpl(
      MessageEncoder<D> encoder,
      Function<? super OutboundMessage<D>, String> topic,
      Duration flushTimeout,
      Map<String, Object> userConfig) {
    super("Kafka", KafkaSink.class, encoder, flushTimeout);
    this.topic = topic;
    Map<String, Object> c = new HashMap<>(userConfig);
    c.put(ProducerConfig.ACKS_CONFIG, "all");
    c.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    // One request in flight: a batch refused while a broker takes over a partition's leadership
    // is retried before any later batch of that partition goes out. With more, a later batch
    // can be appended first and the refused one then loops on OUT_OF_ORDER_SEQUENCE_NUMBER
    // forever (KAFKA-14359), breaking per-key order. ADR 0046.
    c.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1);
    c.put(ProducerConfig.RETRIES_CONFIG, Integer.MAX_VALUE);
    c.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    c.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class);
    c.putIfAbsent(ProducerConfig.MAX_BLOCK_MS_CONFIG, flushTimeout.toMillis());
    this.config = Map.copyOf(c);
    this.maxRequestSize =
        Integer.parseInt(String.valueOf(c.getOrDefault(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 1_048_576)));
  }

  @Override
  protected Pending newLane() {
    return new Pending();
  }

  @Override
  protected ProducerRecord<byte[], byte[]> prepare(ChangeEvent<D> event, OutboundMessage<D> m) {
    String target = destination(event, m, topic, "topic", false);
    byte[] key = m.key().getBytes(StandardCharsets.UTF_8);
    RecordHeaders headers = new RecordHeaders();
    int size = key.length + m.body().length + RECORD_OVERHEAD;
    for (Map.Entry<String, String> h : m.headers().entrySet()) {
      byte[] v = h.getValue().getBytes(StandardCharsets.UTF_8);
      headers.add(new RecordHeader(h.getKey(), v));
      size += h.getKey().length() + v.length;
    }
    requireSize(event, m, size, true, "max.request.size", maxRequestSize);
    return new ProducerRecord<>(target, null, key, m.body(), headers);
  }

  @Override
  protected void send(Pending pending, OutboundMessage<D> m, ProducerRecord<byte[], byte[]> record) {
    CompletableFuture<RecordMetadata> acked = new CompletableFuture<>();
    try {
      Producer<byte[], byte[]> p = producer();
      p.send(record, (metadata, error) -> {
        if (error != null) {
          acked.completeExceptionally(error);
        } else {
          acked.complete(metadata);
        }
      });
      pending.sends.add(new Sent(m, record.topic(), acked, p));
    } catch (KafkaException | IllegalStateException e) {
      // Not the change's fault (metadata timeout, producer closed): fail the flush, not the
      // change, so an outage pauses delivery instead of parking changes.
      // "Failed to construct kafka producer" says nothing without its cause (a host that does not
      // resolve any more, a bad setting): name it.
      throw new SinkException("Kafka send of " + describe(m) + " failed: " + e
          + (e.getCause() != null && e.getCause() != e ? " (caused by " + e.getCause() + ")" : ""), e);
    }
    // The producer reports a metadata timeout (broker unreachable) as an already failed future
    // after blocking up to max.block.ms; stop sending the rest of the batch at once instead of
    // blocking once per record.
    Throwable cause = acked.isDone() ? failureOf(acked) : null;
    if (cause != null && !isRejection(cause)) {
      throw new SinkException("Kafka send of " + describe(m) + " failed: " + cause, cause);
    }
  }

  /** The failure of a completed send, or null if it was acknowledged. */
  private static Throwable failureOf(CompletableFuture<RecordMetadata> f) {
    try {
      f.join();
      return null;
    } catch (CompletionException | CancellationException e) {
      return e.getCause() != null ? e.getCause() : e;
    }
  }

  /**
   * Completes when Kafka acknowledged every record sent for this lease since the last flush, or
   * fails naming the first record it did not acknowledge within the flush timeout or refused;
   * then the producer is replaced, so that records the listener is about to deliver again are not
   * preceded by late retries of the old ones (ADR 0073). Never blocks the caller.
   */
  @Override
  protected CompletionStage<Void> acknowledged(String lease, Pending pending) {
    List<Sent> sends;
    SinkException failure;
    synchronized (pending) {
      sends = new ArrayList<>(pending.sends);
      failure = pending.takeFailure();
      pending.sends.clear();
    }
    if (failure != null) {
      // The batch failed already and the producer is about to be replaced: do not wait, but
      // still look at completed sends for records the broker refused for good.
      return CompletableFuture.failedFuture(settle(lease, pending, sends, failure, null));
    }
    CompletableFuture<?>[] acks = sends.stream().map(Sent::acked).toArray(CompletableFuture[]::new);
    return CompletableFuture.allOf(acks)
        .orTimeout(flushTimeout.toNanos(), TimeUnit.NANOSECONDS)
        .handleAsync((ok, error) -> {
          SinkException f = settle(lease, pending, sends, null,
              error instanceof TimeoutException ? error : null);
          if (f != null) {
            throw f;
          }
          return null;
        }, settler);
  }

  /**
   * Looks at the completed sends: remembers records the broker refused for good, and on any
   * failure replaces the producer and drops the later sends made with it (the listener delivers
   * them again from its checkpoint). Returns the failure to report, with the acknowledged prefix
   * of the batch (ADR 0120), or null.
   */
  private SinkException settle(String lease, Pending pending, List<Sent> sends, SinkException failure,
      Throwable timeout) {
    int unacknowledged = 0;
    for (Sent s : sends) {
      if (!s.acked.isDone()) {
        unacknowledged++;
        if (failure == null) {
          failure = new SinkException(
              "Kafka did not acknowledge " + describe(s.message) + " within " + flushTimeout, timeout);
        }
        continue;
      }
      Throwable cause = failureOf(s.acked);
      if (cause == null) {
        continue;
      }
      unacknowledged++;
      if (isRejection(cause)) {
        rejected(s.message,
            new MessageRejectedException(s.message.source(), "topic " + s.topic + ": " + cause, cause));
      }
      if (failure == null) {
        failure = new SinkException("Kafka rejected " + describe(s.message) + ": " + cause, cause);
      }
    }
    if (failure == null) {
      return null;
    }
    Position prefix = acknowledgedPrefix(sends);
    LOG.debug("{}: {} of {} records unacknowledged; acknowledged through {}", lease, unacknowledged,
        sends.size(), prefix);
    synchronized (pending) {
      Producer<byte[], byte[]> old = resetProducer();
      pending.sends.removeIf(s -> s.producer == old);
    }
    return prefix == null ? failure : new SinkException(failure.getMessage(), failure.getCause(), prefix);
  }

  /**
   * The position of the last change of the longest prefix of {@code sends} (in the order they were
   * sent, the feed's) whose every record the broker acknowledged; null if there is none. The change
   * of the first record not acknowledged is not in it, even if some of its records were; nor, when
   * every record listed was acknowledged (the batch failed at a send), the last change listed,
   * whose later records may not have been sent.
   */
  static Position acknowledgedPrefix(List<Sent> sends) {
    int k = 0;
    while (k < sends.size() && sends.get(k).acked.isDone() && failureOf(sends.get(k).acked) == null) {
      k++;
    }
    if (k == 0) {
      return null;
    }
    String boundary = sends.get(k < sends.size() ? k : k - 1).message.source().id();
    for (int i = k - 1; i >= 0; i--) {
      ChangeEvent<?> change = sends.get(i).message.source();
      if (!change.id().equals(boundary)) {
        return change.position();
      }
    }
    return null;
  }

  private static boolean isRejection(Throwable cause) {
    return cause instanceof RecordTooLargeException
        || cause instanceof RecordBatchTooLargeException
        || cause instanceof InvalidTopicException
        || cause instanceof InvalidRecordException;
  }

  private Producer<byte[], byte[]> producer() {
    synchronized (clientLock) {
      if (closed()) {
        throw new IllegalStateException("Kafka sink is closed");
      }
      if (producer == null) {
        producer = new KafkaProducer<>(config);
      }
      return producer;
    }
  }

  /** Closes the producer at once (dropping what it still buffers); returns the one closed. */
  private Producer<byte[], byte[]> resetProducer() {
    Producer<byte[], byte[]> old;
    synchronized (clientLock) {
      old = producer;
      producer = null;
    }
    if (old != null) {
      old.close(Duration.ZERO);
    }
    return old;
  }

  @Override
  protected void closeClient() {
    Producer<byte[], byte[]> old;
    synchronized (clientLock) {
      old = producer;
      producer = null;
    }
    if (old != null) {
      old.close(flushTimeout);
    }
    settler.shutdown();
  }

  /** Sends of one lease since its last flush; guarded by itself (flushes settle on another thread). */
  static final class Pending extends AbstractBrokerSink.Lane {
    final List<Sent> sends = new ArrayList<>();
  }

  private record Sent(OutboundMessage<?> message, String topic, CompletableFuture<RecordMetadata> acked,
      Producer<byte[], byte[]> producer) {}
}
