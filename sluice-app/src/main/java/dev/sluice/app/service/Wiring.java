package dev.sluice.app.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.ConfigurationException;
import dev.sluice.amqp.AmqpSink;
import dev.sluice.app.config.ConfigLoader;
import dev.sluice.app.config.SluiceConfig;
import dev.sluice.app.config.SluiceConfig.ListenerSection;
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
import dev.sluice.sink.Publication;
import java.util.List;
import java.util.Locale;
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
    MongoLeaseStore.Builder b = MongoLeaseStore.builder(database());
    if (config.mongodb().leaseCollection() != null) {
      b.collection(config.mongodb().leaseCollection());
    }
    return b.build();
  }

  public MongoDeadLetterStore deadLetters() {
    String c = config.mongodb().deadLetterCollection();
    return MongoDeadLetterStore.create(database(), c == null ? DEFAULT_DEAD_LETTERS : c);
  }

  public MongoChangeFeed feed(ListenerSection l) {
    return MongoChangeFeed.builder(client, config.mongodb().database(), l.collection()).build();
  }

  /** The listener section for {@code collection}, or a clear error listing the configured ones. */
  public ListenerSection section(String collection) {
    return config.listeners().stream().filter(l -> l.collection().equals(collection)).findFirst()
        .orElseThrow(() -> new ConfigurationException("No listener for collection '" + collection
            + "' in the configuration; configured: "
            + config.listeners().stream().map(ListenerSection::collection).toList()));
  }

  /** The sink of a listener section; the caller closes it. */
  public SinkHandle sink(ListenerSection l, String topicOrExchangeOverride) {
    MessageEncoder.Builder<BsonDocument> encoder = MessageEncoder.builder(DocumentMapper.bson());
    if (l.sink().publish() != null && "domain-events".equals(l.sink().publish().mode().toLowerCase(Locale.ROOT))) {
      encoder.publication(Publication.domainEvents(l.sink().publish().field(),
          l.sink().publish().idField() == null ? "id" : l.sink().publish().idField()));
    } else {
      encoder.publication(Publication.changes());
    }
    if (l.sink().kafka() != null) {
      String topic = topicOrExchangeOverride != null ? topicOrExchangeOverride : l.sink().kafka().topic();
      KafkaSink<BsonDocument> sink = KafkaSink.builder(l.sink().kafka().bootstrapServers(), topic, encoder.build()).build();
      return new SinkHandle(sink, sink::close, "kafka topic " + topic);
    }
    ConnectionFactory factory = new ConnectionFactory();
    try {
      factory.setUri(l.sink().amqp().uri());
    } catch (Exception e) {
      throw new ConfigurationException("sink.amqp.uri '" + l.sink().amqp().uri() + "' is not a valid AMQP URI: " + e.getMessage());
    }
    String exchange = topicOrExchangeOverride != null ? topicOrExchangeOverride : l.sink().amqp().exchange();
    AmqpSink<BsonDocument> sink = AmqpSink.builder(factory, exchange, encoder.build()).build();
    return new SinkHandle(sink, sink::close, "AMQP exchange " + exchange);
  }

  /** A listener relaying one collection to its sink. */
  public Listener<BsonDocument> listener(ListenerSection l, Handler<BsonDocument> handler, ListenerObserver observer) {
    String at = "listeners[" + config.listeners().indexOf(l) + "]";
    FailurePolicy failure = "park".equalsIgnoreCase(l.onFailure())
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
    if (legacy.isEmpty()) {
      return;
    }
    String at = "listeners[" + config.listeners().indexOf(l) + "]";
    String names = legacy.stream().map(r -> r.name() + " at " + r.checkpoint()).toList().toString();
    if (ConfigLoader.ignoreLegacyCheckpoints(l)) {
      log.warn("{}: ignoring checkpoints written before consumer groups {}; group '{}' starts per its"
          + " bootstrap policy", at, names, ConfigLoader.group(l, at));
      return;
    }
    throw new ConfigurationException(at + " (collection '" + l.collection() + "'): the lease store holds"
        + " checkpoints written before consumer groups existed " + names + ". Consumer group '"
        + ConfigLoader.group(l, at) + "' does not adopt them and would start per its bootstrap policy."
        + " Set legacyCheckpoints: ignore on this entry to start anyway, or carry the position over"
        + " as docs/upgrading.md describes");
  }

  /** A sink with its close action and a description for messages. */
  public record SinkHandle(Handler<BsonDocument> handler, AutoCloseable closer, String description) implements AutoCloseable {
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
