package dev.sluice.demo.relay;

import dev.sluice.testkit.kafka.EmbeddedKafka;
import java.time.Duration;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;

/**
 * Reads every partition of the demo topic from the beginning on one thread and hands each record
 * to the {@link InboxConsumer}. Partitions are assigned, not subscribed: one reader needs no
 * group coordination. If a record cannot be processed the reader stops there (a real consumer
 * would not commit its offset); the demo then reports the failure.
 */
final class KafkaReceiver implements AutoCloseable {
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final InboxConsumer target;
  private final Thread thread;
  private volatile boolean running = true;

  KafkaReceiver(EmbeddedKafka kafka, InboxConsumer target) {
    this.consumer = kafka.consumer();
    this.target = target;
    List<TopicPartition> partitions = consumer.partitionsFor(RelayDemo.TOPIC).stream()
        .map(p -> new TopicPartition(p.topic(), p.partition()))
        .toList();
    consumer.assign(partitions);
    consumer.seekToBeginning(partitions);
    this.thread = new Thread(this::run, "relay-demo-kafka-consumer");
    this.thread.setDaemon(true);
    this.thread.start();
  }

  private void run() {
    try {
      while (running) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
          target.accept(r.value());
        }
      }
    } catch (WakeupException e) {
      // close() woke the poll up
    } catch (RuntimeException e) {
      // InboxConsumer recorded it; stop before the record: nothing behind it is skipped.
    } finally {
      consumer.close(Duration.ofSeconds(5));
    }
  }

  @Override
  public void close() {
    running = false;
    consumer.wakeup();
    try {
      thread.join(Duration.ofSeconds(10).toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
