package dev.sluice.mongodb.lease;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The conformance suite on a server without updates by pipeline (MongoDB before 4.2, refusing them
 * with error 14): the store sends none (ADR 0083: classic updates with {@code $currentDate}), so it
 * behaves the same. Needs the embedded server's test-kit control, so it starts its own even under
 * {@code -Dsluice.mongodb.uri}.
 */
class MongoLeaseStoreWithoutPipelineUpdatesTest extends MongoLeaseStoreContract {
  private static EmbeddedMongo mongo;
  private static MongoClient client;
  private static MongoDatabase database;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start().pipelineUpdates(false);
    client = mongo.client();
    database = client.getDatabase("sluice_lease_before_4_2");
  }

  @AfterAll
  static void stop() {
    client.close();
    mongo.close();
  }

  @Override
  protected MongoDatabase database() {
    return database;
  }
}
