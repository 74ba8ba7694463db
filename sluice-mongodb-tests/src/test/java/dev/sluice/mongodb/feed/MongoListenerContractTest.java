package dev.sluice.mongodb.feed;

import dev.sluice.testkit.feed.ChangeFeedContract.Source;
import dev.sluice.testkit.feed.ListenerContract;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import org.bson.BsonDocument;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The listener's deployment scenarios on the MongoDB change stream and lease store: the embedded
 * server, or a real deployment given {@code -Dsluice.mongodb.uri}.
 */
class MongoListenerContractTest extends ListenerContract<BsonDocument> {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Override
  protected Source<BsonDocument> newSource() {
    return new MongoTestSource(MONGO.client(), true, null); // units of writes are transactions here too (ADR 0087)
  }
}
