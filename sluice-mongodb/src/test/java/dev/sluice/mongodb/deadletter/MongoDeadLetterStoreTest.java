package dev.sluice.mongodb.deadletter;

import com.mongodb.client.MongoClient;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.sink.DeadLetterStoreContract;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

class MongoDeadLetterStoreTest extends DeadLetterStoreContract {
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();
  private static EmbeddedMongo mongo;
  private static MongoClient client;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start();
    client = mongo.client();
  }

  @AfterAll
  static void stop() {
    client.close();
    mongo.close();
  }

  @Override
  protected DeadLetterStore<BsonDocument> newStore() {
    return MongoDeadLetterStore.create(client.getDatabase("app"), "deadletters_" + COLLECTIONS.incrementAndGet());
  }

  @Override
  protected boolean keepsRaw() {
    return true;
  }
}
