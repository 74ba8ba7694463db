package dev.sluice.app.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.ConfigurationException;
import dev.sluice.amqp.AmqpSink;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.kafka.KafkaSink;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import dev.sluice.sink.MessageEncoder;
import java.util.List;
import org.bson.BsonDocument;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Builds feeds, stores, sinks and listeners from a validated {@link SluiceConfig}. */
public final class Wiring {
  private static final Logger log = LoggerFactory.getLogger(Wiring.class);
  public static final String DEFAULT_DEAD_LETTERS = "sluice_dead_letters";

  private final SluiceConfig config;
  private final MongoClient client;

  public Wiring(SluiceConfig config, MongoClient client) {
    this.config = config;
    this.client = client;
  }

  public MongoDatabase database() {
    return client.getDatabase(config.mongodb().database());
  }

  public LeaseStore leaseStore() {
    return leaseStore(MongoLeaseStore.DEFAULT_OPERATION_TIMEOUT);
  }

  /** The lease store, each call bounded by {@code timeout}. */
  public LeaseStore leaseStore(java.time.Duration timeout) {
    MongoLeaseStore.Builder b = MongoLeaseStore.builder(database()).operationTimeout(timeout);
    if (config.mongodb().leaseCollection() != null) {
      b.collection(config.mongodb().leaseCollection());
    }
    return b.build();
  }

  public MongoDeadLetterStore deadLetters() {
    String c = config.mongodb().deadLetterCollection();
    return MongoDeadLetterStore.create(database(), c == null ? DEFAULT_DEAD_LETTERS : c);
  }

  /** The dead-letter store, each call bounded by {@code timeout}. */
  public MongoDeadLetterStore deadLetters(java.time.Duration timeout) {
    String c = config.mongodb().deadLetterCollection();
    return MongoDeadLetterStore.create(database().withTimeout(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS),
        c == null ? DEFAULT_DEAD_LETTERS : c);
  }

  public MongoChangeFeed feed(ListenerSection l) {
    return MongoChangeFeed.builder(client, config.mongodb().database(), l.collection())
        .onInvalidate(ConfigLoader.onInvalidate(l, "listeners[" + config.listeners().indexOf(l) + "]"))
        .build();
  }

  /**
   * The listener section for {@code collection} and {@code group} (null: the only entry of the
   * collection), or a clear error listing the configured ones.
   */
  public ListenerSection section(String collection, String group) {
    List<ListenerSection> matches = new java.util.ArrayList<>();
    List<String> configured = new java.util.ArrayList<>();
    for (int i = 0; i < config.listeners().size(); i++) {
      ListenerSection l = config.listeners().get(i);
      String g = ConfigLoader.group(l, "listeners[" + i + "]");
      configured.add(l.collection() + " (group " + g + ")");
      if (l.collection().equals(collection) && (group == null || group.equals(g))) {
        matches.add(l);
      }
    }
    if (matches.size() == 1) {
      return matches.get(0);
    }
    throw new ConfigurationException(matches.isEmpty()
        ? "No listener for collection '" + collection + "'" + (group == null ? "" : " and group '" + group + "'")
            + " in the configuration; configured: " + configured
        : "Several listeners read collection '" + collection + "': name one with --group; configured: "
            + configured);
  }

  /** The scope of {@code l}'s dead letters, {@code group/stream} (ListenerConfig.deadLetterScope). */
  public String deadLetterScope(ListenerSection l) {
    return ConfigLoader.group(l, "listeners[" + config.listeners().indexOf(l) + "]") + "/" + feed(l).stream();
  }

  /** The sink of a listener section; the caller closes it. */
  public SinkHandle sink(ListenerSection l, String topicOrExchangeOverride) {
    MessageEncoder.Builder<BsonDocument> encoder = MessageEncoder.builder(DocumentMapper.bson());
    encoder.publication(ConfigLoader.publication(l, "listeners[" + config.listeners().indexOf(l) + "]"));
    if (l.sink().kafka() != null) {
      String topic = topicOrExchangeOverride != null ? topicOrExchangeOverride : l.sink().kafka().topic();
      KafkaSink<BsonDocument> sink = KafkaSink.builder(l.sink().kafka().bootstrapServers(), topic, encoder.build()).build();
      SinkReach reach = SinkReach.kafka(l.sink().kafka().bootstrapServers());
      return new SinkHandle(sink, () -> {
        reach.close();
        sink.close();
      }, "kafka topic " + topic, reach);
    }
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(l.sink().amqp().uri());
    } catch (Exception e) {
      throw new ConfigurationException("listeners[" + config.listeners().indexOf(l) + "].sink.amqp.uri '"
          + dev.sluice.app.cli.Secrets.mask(l.sink().amqp().uri()) + "' is not a valid AMQP URI: " + dev.sluice.app.cli.Secrets.mask(e.getMessage()));
    }
    String exchange = topicOrExchangeOverride != null ? topicOrExchangeOverride : l.sink().amqp().exchange();
    AmqpSink<BsonDocument> sink = AmqpSink.builder(factory, exchange, encoder.build()).build();
    return new SinkHandle(sink, sink::close, "AMQP exchange " + exchange, SinkReach.amqp(factory));
  }

  /** A listener relaying one collection to its sink. */
  public Listener<BsonDocument> listener(ListenerSection l, Handler<BsonDocument> handler, ListenerObserver observer) {
    String at = "listeners[" + config.listeners().indexOf(l) + "]";
    FailurePolicy failure = ConfigLoader.parks(l, at)
        ? FailurePolicy.park(ConfigLoader.retry(l, at), deadLetters())
        : FailurePolicy.block(ConfigLoader.retry(l, at));
    return Listener.builder(feed(l), leaseStore()).group(ConfigLoader.group(l, at))
        .handler(handler)
        .partitions(l.partitions() == null ? 1 : l.partitions())
        .leaseDuration(ConfigLoader.leaseDuration(l, at))
        .checkpoint(ConfigLoader.checkpoint(l, at))
        .bootstrap(ConfigLoader.bootstrap(l, at))
        .onHistoryLost(ConfigLoader.historyLost(l, at))
        .onFailure(failure)
        .observer(observer)
        .build();
  }

  /**
   * Lease records of {@code l}'s collection written before consumer groups existed (named
   * {@code <stream>#<partition>}, docs/upgrading.md) that carry a checkpoint. A listener never
   * adopts them: it starts per its bootstrap policy.
   */
  public List<LeaseRecord> legacyCheckpoints(ListenerSection l) {
    String stream = feed(l).stream();
    return leaseStore().list(stream + "#").stream()
        .filter(r -> r.name().substring(stream.length() + 1).matches("[0-9]+"))
        .filter(r -> r.checkpoint() != null)
        .toList();
  }

  /**
   * Refuses to start {@code l} while legacy checkpoints of its collection exist, unless the entry
   * says {@code legacyCheckpoints: ignore}: starting silently per the bootstrap policy would skip
   * or repeat what the old records had reached.
   */
  public void checkLegacyCheckpoints(ListenerSection l) {
    List<LeaseRecord> legacy = legacyCheckpoints(l);
    long legacyDeadLetters = ConfigLoader.parks(l, "listeners[" + config.listeners().indexOf(l) + "]")
        ? deadLetters().count(feed(l).stream()) : 0;
    if (legacy.isEmpty() && legacyDeadLetters == 0) {
      return;
    }
    String at = "listeners[" + config.listeners().indexOf(l) + "]";
    String names = legacy.stream().map(r -> r.name() + " at " + r.checkpoint()).toList()
        + (legacyDeadLetters == 0 ? "" : " and " + legacyDeadLetters + " dead letter(s) parked under '"
            + feed(l).stream() + "' (not blocking their keys any more)");
    if (ConfigLoader.ignoreLegacyCheckpoints(l)) {
      log.warn("{}: ignoring checkpoints written before consumer groups {}; group '{}' starts per its"
          + " bootstrap policy", at, names, ConfigLoader.group(l, at));
      return;
    }
    throw new ConfigurationException(at + " (collection '" + l.collection() + "'): the store holds"
        + " records written before consumer groups existed: " + names + ". Consumer group '"
        + ConfigLoader.group(l, at) + "' does not adopt them and would start per its bootstrap policy."
        + " Set legacyCheckpoints: ignore on this entry to start anyway, or carry the position over"
        + " as docs/upgrading.md describes");
  }

  /** A sink with its close action, a description for messages and its broker's reachability. */
  public record SinkHandle(Handler<BsonDocument> handler, AutoCloseable closer, String description, SinkReach reach)
      implements AutoCloseable {
    @Override
    public void close() {
      try {
        closer.close();
      } catch (Exception e) {
        throw new IllegalStateException("Closing " + description + " failed", e);
      }
    }
  }
}
