package dev.sluice.mongodb.deadletter;

import com.mongodb.client.MongoClient;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.sink.DeadLetterStoreContract;
import java.util.concurrent.atomic.AtomicInteger;
import org.bson.BsonDocument;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The dead-letter contract on the embedded MongoDB, or a real deployment given -Dsluice.mongodb.uri. */
class MongoDeadLetterStoreTest extends DeadLetterStoreContract {
  private static final AtomicInteger COLLECTIONS = new AtomicInteger();
  private static InMemoryMongo mongo;
  private static MongoClient client;
  private static String database;

  @BeforeAll
  static void start() {
    mongo = new InMemoryMongo();
    client = mongo.client();
    database = mongo.freshDatabase().getName();
  }

  @AfterAll
  static void stop() {
    mongo.close();
  }

  @Override
  protected DeadLetterStore<BsonDocument> newStore() {
    return MongoDeadLetterStore.create(client.getDatabase(database), "deadletters_" + COLLECTIONS.incrementAndGet());
  }

  @Override
  protected boolean keepsRaw() {
    return true;
  }
}
