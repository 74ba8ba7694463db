package dev.sluice.app.service;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.source.MongoBackend;
import dev.sluice.sink.DocumentMapper;
import org.bson.BsonDocument;

/** A MongoDB deployment: change streams of collections, leases and dead letters in collections. */
final class MongoSource implements Source<BsonDocument> {
  private final SluiceConfig.MongoSection config;
  private final MongoBackend backend;

  /**
   * @param service whether for {@code sluice run} (a socket read timeout unless the URI sets one,
   *     {@link SluiceService#clientSettings}) or for a command (the URI as it is)
   */
  MongoSource(SluiceConfig.MongoSection config, boolean service) {
    this.config = config;
    this.backend = MongoBackend.builder(service ? SluiceService.clientSettings(config.uri())
            : MongoClientSettings.builder().applyConnectionString(new ConnectionString(config.uri())).build(),
            config.database())
        .leaseCollection(config.leaseCollection())
        .deadLetterCollection(config.deadLetterCollection())
        .build();
  }

  @Override
  public MongoBackend backend() {
    return backend;
  }

  /** The source's client (tests: sessions it holds when it closes). */
  MongoClient client() {
    return backend.client();
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
        backend.database().getCollection(l.collection(), BsonDocument.class).find(),
        doc -> MongoChangeFeed.keyOf(doc.get("_id")), doc -> new BsonDocument("_id", doc.get("_id")), 500, handler);
  }

  @Override
  public ChangeFeed<BsonDocument> feed(ListenerSection l, String at) {
    return backend.feedBuilder(l.collection())
        .onInvalidate(ConfigLoader.onInvalidate(l, at))
        .build();
  }

  @Override
  public DocumentMapper<BsonDocument> mapper() {
    return DocumentMapper.bson();
  }
}
