package dev.sluice.testkit.kafka;

import dev.sluice.SluiceException;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.net.Ports;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import kafka.server.BrokerServer;
import kafka.testkit.KafkaClusterTestKit;
import kafka.testkit.TestKitNodes;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.server.common.MetadataVersion;

/**
 * A real Kafka KRaft cluster inside the JVM: one controller and one broker, on a fixed port so
 * that {@link #stopBroker()} and {@link #startBroker()} simulate an outage that clients recover
 * from. Data is kept on disk across a broker restart. Always {@link #close()} it: its threads are
 * not daemons.
 *
 * <p>{@link #startBehindProxy} starts one whose broker advertises a {@link FaultProxy} in front of
 * it, so that every connection of every client (and the broker's own connections to itself, such
 * as the transaction coordinator's markers) goes through the proxy a test can break.
 */
public final class EmbeddedKafka implements AutoCloseable {
  private final KafkaClusterTestKit cluster;
  private final int port;
  private final int brokerId;
  private final FaultProxy proxy;
  private final int directPort;

  private EmbeddedKafka(KafkaClusterTestKit cluster, int port, int brokerId, FaultProxy proxy, int directPort) {
    this.cluster = cluster;
    this.port = port;
    this.brokerId = brokerId;
    this.proxy = proxy;
    this.directPort = directPort;
  }

  /** Formats and starts a one-broker cluster (about 2-3 s). */
  public static EmbeddedKafka start() {
    return start(null);
  }

  /**
   * Formats and starts a one-broker cluster behind a {@link FaultProxy} (closed with the cluster,
   * after {@code proxyLifetime} at the latest): the broker listens on a port of its own and
   * advertises the proxy's, so a client that bootstraps through the proxy is sent back to it by
   * every metadata answer, and never reaches the broker around it. {@link #bootstrapServers()} is
   * the proxy's address. A second listener, {@link #directBootstrapServers()}, advertises itself:
   * the test's own reads of the log (what a consumer would see) while the proxy is broken.
   */
  public static EmbeddedKafka startBehindProxy(Duration proxyLifetime) {
    return start(proxyLifetime);
  }

  private static EmbeddedKafka start(Duration proxyLifetime) {
    int port = Ports.free();
    KafkaClusterTestKit cluster = null;
    FaultProxy proxy = null;
    try {
      Map<String, String> listener = Map.of("listeners", "EXTERNAL://localhost:" + port);
      int directPort = -1;
      if (proxyLifetime != null) {
        proxy = FaultProxy.to("kafka", "127.0.0.1", port, 0, proxyLifetime);
        directPort = Ports.free();
        // The listener on 127.0.0.1 (the proxy's target), its advertised address the proxy's;
        // a second listener, DIRECT, for the test's own view of the log around the proxy.
        listener = Map.of(
            "listeners", "EXTERNAL://127.0.0.1:" + port + ",DIRECT://127.0.0.1:" + directPort,
            "advertised.listeners", "EXTERNAL://" + proxy.address() + ",DIRECT://127.0.0.1:" + directPort,
            "listener.security.protocol.map", "EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,DIRECT:PLAINTEXT");
      }
      TestKitNodes nodes =
          new TestKitNodes.Builder()
              .setCombined(false)
              .setNumBrokerNodes(1)
              .setNumControllerNodes(1)
              .setBootstrapMetadataVersion(MetadataVersion.latestProduction())
              .build();
      int brokerId = nodes.brokerNodes().firstKey();
      nodes =
          new TestKitNodes.Builder()
              .setCombined(false)
              .setNumBrokerNodes(1)
              .setNumControllerNodes(1)
              .setBootstrapMetadataVersion(MetadataVersion.latestProduction())
              .setPerServerProperties(
                  Map.of(brokerId, listener))
              .build();
      cluster =
          new KafkaClusterTestKit.Builder(nodes)
              .setConfigProp("offsets.topic.replication.factor", "1")
              .setConfigProp("transaction.state.log.replication.factor", "1")
              .setConfigProp("transaction.state.log.min.isr", "1")
              .setConfigProp("group.initial.rebalance.delay.ms", "0")
              .setConfigProp("auto.create.topics.enable", "false")
              .build();
      cluster.format();
      cluster.startup();
      cluster.waitForReadyBrokers();
      return new EmbeddedKafka(cluster, port, brokerId, proxy, directPort);
    } catch (Exception e) {
      closeQuietly(cluster);
      if (proxy != null) {
        proxy.close();
      }
      throw new SluiceException("Cannot start the embedded Kafka cluster: " + e, e);
    }
  }

  /** Where clients connect: the broker, or the proxy in front of it ({@link #startBehindProxy}). */
  public String bootstrapServers() {
    return proxy != null ? proxy.address() : "localhost:" + port;
  }

  /**
   * The broker's second listener, reached around the proxy (a client that bootstraps here is sent
   * back here by the metadata answers): for the test's own view of the log, never for the client
   * under test.
   *
   * @throws IllegalStateException if this cluster was not started {@link #startBehindProxy behind a proxy}
   */
  public String directBootstrapServers() {
    if (proxy == null) {
      throw new IllegalStateException("This embedded Kafka has no second listener: not started behind a fault proxy");
    }
    return "127.0.0.1:" + directPort;
  }

  /**
   * The proxy every connection to the broker goes through.
   *
   * @throws IllegalStateException if this cluster was not started {@link #startBehindProxy behind one}
   */
  public FaultProxy proxy() {
    if (proxy == null) {
      throw new IllegalStateException("This embedded Kafka was not started behind a fault proxy (startBehindProxy)");
    }
    return proxy;
  }

  /** Creates a topic with replication factor 1 and waits until it exists. */
  public void createTopic(String name, int partitions) {
    createTopic(name, partitions, Map.of());
  }

  /**
   * Creates a topic with topic-level configs (such as {@code max.message.bytes}) and returns once
   * the leader of every partition serves it, not merely once the metadata names a leader.
   *
   * <p>The broker publishes a new topic in its metadata cache before its replica manager has
   * created the partitions' logs; a produce in that window gets NOT_LEADER_OR_FOLLOWER. A new
   * idempotent producer whose first batch for a partition is refused that way while its next
   * batch (sent on the same connection, in flight) arrives just after the log exists gets the
   * next batch appended (the broker accepts any first sequence from an unknown producer) and then
   * retries the first one forever with OUT_OF_ORDER_SEQUENCE_NUMBER (KAFKA-14359, KAFKA-15591):
   * a flush times out. ListOffsets is answered by the same leader-only path as Produce, so once
   * it succeeds on every partition a produce cannot meet that window any more.
   */
  public void createTopic(String name, int partitions, Map<String, String> configs) {
    try (Admin admin = admin()) {
      admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs))).all().get();
      awaitServed(admin, List.of(name));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new SluiceException("Interrupted while creating topic " + name, e);
    } catch (ExecutionException e) {
      throw new SluiceException("Cannot create topic " + name + ": " + e.getCause(), e.getCause());
    }
  }

  /**
   * Waits until every partition of {@code topics} has a leader that answers ListOffsets (a
   * leader-only request, as Produce is). A bounded poll, not Awaitility: this class also runs in
   * the demo, outside any test.
   */
  private static void awaitServed(Admin admin, Collection<String> topics) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    String last = "no answer yet";
    while (System.nanoTime() < deadline) {
      try {
        Map<TopicPartition, OffsetSpec> request = new HashMap<>();
        boolean leaders = true;
        for (TopicDescription t : admin.describeTopics(topics).allTopicNames().get(5, TimeUnit.SECONDS).values()) {
          for (TopicPartitionInfo p : t.partitions()) {
            leaders &= p.leader() != null && !p.leader().isEmpty();
            request.put(new TopicPartition(t.name(), p.partition()), OffsetSpec.latest());
          }
        }
        if (leaders) {
          admin.listOffsets(request).all().get(5, TimeUnit.SECONDS);
          return;
        }
        last = "a partition has no leader in the metadata";
      } catch (ExecutionException | TimeoutException e) {
        last = String.valueOf(e.getCause() == null ? e : e.getCause());
      }
      Thread.sleep(20);
    }
    throw new SluiceException("Partitions of " + topics + " not served by a leader after 30 s: " + last);
  }

  public Admin admin() {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers());
    return Admin.create(p);
  }

  /** A consumer reading from the earliest offset, in a fresh group; byte[] keys and values. */
  public KafkaConsumer<byte[], byte[]> consumer() {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers());
    p.put(ConsumerConfig.GROUP_ID_CONFIG, "test-" + UUID.randomUUID());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    return new KafkaConsumer<>(p);
  }

  /**
   * Reads {@code topic} from the beginning until {@code count} records arrived or {@code
   * timeout} passed; returns what arrived (per partition in offset order).
   */
  public List<ConsumerRecord<byte[], byte[]>> readAll(String topic, int count, Duration timeout) {
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
      // Assigned, not subscribed: no consumer-group join, whose rebalance delay would race
      // with the timeout on a loaded machine.
      List<TopicPartition> partitions = new ArrayList<>();
      consumer.partitionsFor(topic, timeout).forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      long deadline = System.nanoTime() + timeout.toNanos();
      while (out.size() < count && System.nanoTime() < deadline) {
        consumer.poll(Duration.ofMillis(100)).forEach(out::add);
      }
    }
    return out;
  }

  /**
   * Every record {@code topic} holds now: each partition read from its beginning up to its end
   * offset as it was when the read began, returning as soon as that is reached (unlike {@link
   * #readAll}, which polls until a count or the timeout, so a read of "everything" waits the whole
   * timeout). Fails if {@code timeout} passes first.
   */
  public List<ConsumerRecord<byte[], byte[]>> readToEnd(String topic, Duration timeout) {
    try (KafkaConsumer<byte[], byte[]> consumer = consumer()) {
      return readToEnd(consumer, topic, timeout);
    }
  }

  /**
   * As {@link #readToEnd(String, Duration)}, with a consumer of the caller's (another address, a
   * {@code read_committed} isolation level, other deserializers), which it assigns to the topic's
   * partitions; none if the topic does not exist. A transaction's commit marker takes an offset:
   * the read passes it, and it is no record.
   */
  public static <K, V> List<ConsumerRecord<K, V>> readToEnd(KafkaConsumer<K, V> consumer, String topic,
      Duration timeout) {
    List<ConsumerRecord<K, V>> out = new ArrayList<>();
    long deadline = System.nanoTime() + timeout.toNanos();
    List<TopicPartition> partitions = new ArrayList<>();
    List<org.apache.kafka.common.PartitionInfo> infos = consumer.partitionsFor(topic, timeout);
    if (infos == null) {
      return out;
    }
    infos.forEach(p -> partitions.add(new TopicPartition(topic, p.partition())));
    Map<TopicPartition, Long> ends = consumer.endOffsets(partitions, timeout);
    consumer.assign(partitions);
    consumer.seekToBeginning(partitions);
    while (partitions.stream().anyMatch(p -> consumer.position(p, timeout) < ends.get(p))) {
      if (System.nanoTime() - deadline > 0) {
        throw new IllegalStateException("Topic " + topic + " not read up to its end offsets " + ends + " within "
            + timeout + ": " + out.size() + " records read");
      }
      for (ConsumerRecord<K, V> r : consumer.poll(Duration.ofMillis(100))) {
        if (r.offset() < ends.get(new TopicPartition(r.topic(), r.partition()))) {
          out.add(r);
        }
      }
    }
    return out;
  }

  /** Stops the broker (the controller keeps running); clients see the broker unreachable. */
  public void stopBroker() {
    BrokerServer broker = cluster.brokers().get(brokerId);
    broker.shutdown();
    broker.awaitShutdown();
  }

  /** Starts the broker again on the same port and data directory. */
  public void startBroker() {
    try {
      cluster.brokers().get(brokerId).startup();
      cluster.waitForReadyBrokers();
      // Registered and unfenced is not serving: the partitions' leadership comes back after
      // that; a fresh producer (the sinks replace theirs after a failed flush) must not race it
      // (see createTopic).
      try (Admin admin = admin()) {
        Set<String> topics = admin.listTopics(new ListTopicsOptions().listInternal(true)).names().get();
        if (!topics.isEmpty()) {
          awaitServed(admin, topics);
        }
      }
    } catch (Exception e) {
      throw new SluiceException("Cannot restart the embedded Kafka broker: " + e, e);
    }
  }

  @Override
  public void close() {
    try {
      if (proxy != null) {
        // A broker shutting down behind a fault stays in its controlled shutdown until it ends.
        passQuietly(proxy);
      }
      cluster.close();
    } catch (Exception e) {
      throw new SluiceException("Cannot stop the embedded Kafka cluster: " + e, e);
    } finally {
      if (proxy != null) {
        proxy.close();
      }
    }
  }

  private static void passQuietly(FaultProxy proxy) {
    try {
      proxy.pass();
    } catch (IllegalStateException closed) {
      // its lifetime ended: nothing passes, nothing is held either
    }
  }

  private static void closeQuietly(KafkaClusterTestKit cluster) {
    if (cluster != null) {
      try {
        cluster.close();
      } catch (Exception ignored) {
        // already failing
      }
    }
  }
}
