package dev.sluice.app.service;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import dev.sluice.app.cli.Messages;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.deadletter.MongoDeadLetterStore;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.sink.DocumentMapper;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonInt32;

/** A MongoDB deployment: change streams of collections, leases and dead letters in collections. */
final class MongoSource implements Source<BsonDocument> {
  private static final BsonDocument PING = new BsonDocument("ping", new BsonInt32(1));

  private final SluiceConfig.MongoSection config;
  private final MongoClient client;

  /**
   * @param service whether for {@code sluice run} (a socket read timeout unless the URI sets one,
   *     {@link SluiceService#clientSettings}) or for a command (the URI as it is)
   */
  MongoSource(SluiceConfig.MongoSection config, boolean service) {
    this.config = config;
    this.client = service ? MongoClients.create(SluiceService.clientSettings(config.uri()))
        : MongoClients.create(config.uri());
  }

  /** The source's client (tests: sessions it holds when it closes). */
  MongoClient client() {
    return client;
  }

  private MongoDatabase database() {
    return client.getDatabase(config.database());
  }

  @Override
  public String name() {
    return "MongoDB";
  }

  @Override
  public String targetKind() {
    return "collection";
  }

  @Override
  public String describe(ListenerSection l) {
    return config.database() + "." + l.collection();
  }

  /** Every document of the collection ({@code find()}), keyed by its {@code _id}. */
  @Override
  public dev.sluice.sink.Replay.Result replayCurrentState(ListenerSection l, String at, String replayId,
      dev.sluice.listener.Handler<BsonDocument> handler) {
    return dev.sluice.sink.Replay.currentState(feed(l, at).stream(), replayId,
        database().getCollection(l.collection(), BsonDocument.class).find(),
        doc -> MongoChangeFeed.keyOf(doc.get("_id")), doc -> new BsonDocument("_id", doc.get("_id")), 500, handler);
  }

  @Override
  public ChangeFeed<BsonDocument> feed(ListenerSection l, String at) {
    return MongoChangeFeed.builder(client, config.database(), l.collection())
        .onInvalidate(ConfigLoader.onInvalidate(l, at))
        .build();
  }

  @Override
  public LeaseStore leaseStore(Duration bound) {
    MongoLeaseStore.Builder b = MongoLeaseStore.builder(database())
        .operationTimeout(bound == null ? MongoLeaseStore.DEFAULT_OPERATION_TIMEOUT : bound);
    if (config.leaseCollection() != null) {
      b.collection(config.leaseCollection());
    }
    return b.build();
  }

  @Override
  public MongoDeadLetterStore deadLetters(Duration bound) {
    String c = config.deadLetterCollection() == null ? Wiring.DEFAULT_DEAD_LETTERS : config.deadLetterCollection();
    return MongoDeadLetterStore.create(bound == null ? database()
        : database().withTimeout(bound.toMillis(), TimeUnit.MILLISECONDS), c);
  }

  @Override
  public long parked(DeadLetterStore<BsonDocument> store, String scope) {
    return ((MongoDeadLetterStore) store).count(scope);
  }

  @Override
  public DocumentMapper<BsonDocument> mapper() {
    return DocumentMapper.bson();
  }

  @Override
  public String problem() {
    try {
      client.getDatabase("admin").withTimeout(ServiceHealth.BOUND.toMillis(), TimeUnit.MILLISECONDS).runCommand(PING);
      return null;
    } catch (RuntimeException e) {
      return "MongoDB does not answer: " + Messages.oneLine(e);
    }
  }

  /** Closes the client; {@link Wiring#close()} bounds how long that is waited for (docs/adr/0103). */
  @Override
  public void close() {
    client.close();
  }

}
