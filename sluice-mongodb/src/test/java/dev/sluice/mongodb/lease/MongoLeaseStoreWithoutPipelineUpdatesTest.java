package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Clock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite on a server without updates by pipeline (MongoDB before 4.2, refusing them
 * with error 14): the capability probe picks the fallback that reads the server clock with
 * {@code hello} before each decision (ADR 0011). Needs the embedded server's test-kit control, so
 * it starts its own even under {@code -Dsluice.mongodb.uri}.
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

  @Test
  void theProbeChoosesTheHelloClock() {
    assertThat(((DefaultMongoLeaseStore) createStore(Clock.systemUTC())).judgesExpiryInStatement()).isFalse();
  }
}
