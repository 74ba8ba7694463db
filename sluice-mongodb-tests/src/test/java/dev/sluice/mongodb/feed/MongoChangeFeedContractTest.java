package dev.sluice.mongodb.feed;

import dev.sluice.testkit.feed.ChangeFeedContract;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import org.bson.BsonDocument;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The feed conformance suite on the MongoDB change stream: against the embedded server, or a real
 * deployment given {@code -Dsluice.mongodb.uri} (where a unit of several writes is a transaction;
 * the embedded server has none, so there it is one ordered bulk write). Cutting history trims the
 * oplog of an embedded server of the test's own, even with a real deployment given.
 */
class MongoChangeFeedContractTest extends ChangeFeedContract<BsonDocument> {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Override
  protected Source<BsonDocument> newSource() {
    return new MongoTestSource(MONGO.client(), true, null); // units of writes are transactions here too (ADR 0087)
  }

  @Override
  protected Source<BsonDocument> newSourceWithForgettableHistory() {
    EmbeddedMongo own = EmbeddedMongo.start();
    return new MongoTestSource(own.client(), true, own);
  }
}
