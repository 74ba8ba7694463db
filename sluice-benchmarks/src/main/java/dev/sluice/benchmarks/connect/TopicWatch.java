package dev.sluice.benchmarks.connect;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * The finish line of the connector benchmarks: a consumer thread that reads a topic from its
 * beginning ({@code read_committed}, so with exactly-once only committed transactions count) and
 * hands each record to a listener with the {@link System#nanoTime} at which it was received.
 * {@link #awaitCount} is the common case: the instant the topic held {@code n} records.
 */
final class TopicWatch implements AutoCloseable {

  /** Called on the watch's thread for every record, in offset order per Kafka partition. */
  interface Listener {
    void record(ConsumerRecord<String, String> record, long receivedNanos);
  }

  private final KafkaConsumer<String, String> consumer;
  private final Thread thread;
  private final Listener listener;
  private final AtomicLong count = new AtomicLong();
  private final CountDownLatch assigned = new CountDownLatch(1);
  private volatile long target = Long.MAX_VALUE;
  private volatile long reachedAtNanos;
  private volatile CountDownLatch reached = new CountDownLatch(1);
  private volatile RuntimeException failure;
  /** The nanoTime at which the n-th record arrived, at index n - 1 (issue 36: time to the first). */
  private long[] arrivals = new long[1024];

  TopicWatch(String bootstrap, String topic, Listener listener) {
    this.listener = listener;
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 5000);
    consumer = new KafkaConsumer<>(p);
    thread = new Thread(() -> run(topic), "watch-" + topic);
    thread.setDaemon(true);
    thread.start();
  }

  TopicWatch(String bootstrap, String topic) {
    this(bootstrap, topic, (r, t) -> { });
  }

  private void run(String topic) {
    try {
      List<TopicPartition> parts = new ArrayList<>();
      List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
      infos.forEach(i -> parts.add(new TopicPartition(topic, i.partition())));
      consumer.assign(parts);
      consumer.seekToBeginning(parts);
      parts.forEach(consumer::position);
      assigned.countDown();
      while (true) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
          long now = System.nanoTime();
          listener.record(r, now);
          long n = count.get() + 1;
          synchronized (this) {
            if (n > arrivals.length) {
              arrivals = java.util.Arrays.copyOf(arrivals, (int) Math.max(n, 2L * arrivals.length));
            }
            arrivals[(int) (n - 1)] = now;
          }
          if (count.incrementAndGet() == target) {
            reachedAtNanos = now;
            reached.countDown();
          }
        }
      }
    } catch (WakeupException closing) {
      // close()
    } catch (RuntimeException e) {
      failure = e;
      assigned.countDown();
      reached.countDown();
    } finally {
      consumer.close(Duration.ZERO);
    }
  }

  /** Waits until the consumer is assigned and positioned, so its start is not on the clock. */
  TopicWatch awaitReady() throws InterruptedException {
    if (!assigned.await(60, TimeUnit.SECONDS) || failure != null) {
      throw new IllegalStateException("the watch did not start", failure);
    }
    return this;
  }

  long count() {
    return count.get();
  }

  /** The nanoTime at which the topic held {@code n} records (1-based), or 0 if it does not yet. */
  synchronized long receivedAt(long n) {
    return n >= 1 && n <= count.get() ? arrivals[(int) (n - 1)] : 0;
  }

  /** Returns the nanoTime at which the topic held {@code n} records; fails after {@code timeout}. */
  long awaitCount(long n, Duration timeout) throws InterruptedException {
    synchronized (this) {
      if (count.get() >= n) {
        return System.nanoTime();
      }
      reached = new CountDownLatch(1);
      target = n;
    }
    // The consumer thread may have passed n between the check and setting the target.
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!reached.await(100, TimeUnit.MILLISECONDS)) {
      if (count.get() >= n) {
        return System.nanoTime(); // passed before the target was set: an upper bound, rare
      }
      if (System.nanoTime() - deadline > 0) {
        throw new IllegalStateException("only " + count.get() + " of " + n + " records within " + timeout);
      }
    }
    if (failure != null) {
      throw failure;
    }
    return reachedAtNanos;
  }

  @Override
  public void close() throws InterruptedException {
    consumer.wakeup();
    thread.join(10_000);
  }
}
