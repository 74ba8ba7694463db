package dev.sluice.mongodb.lock;

import com.mongodb.client.MongoClient;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.lock.LockContract;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The lock conformance suite on a staged sharded cluster whose routers' clocks are 5 s apart:
 * successive commands get the {@code $$NOW} of one router, then of the other (ADR 0083). Starts its
 * own embedded server (the knob is the test kit's) even under {@code -Dsluice.mongodb.uri}.
 */
class MongoLockOnTwoRouterClocksTest extends LockContract {
  private static EmbeddedMongo mongo;
  private static MongoClient client;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start().routerClockOffsets(Duration.ZERO, Duration.ofSeconds(5));
    client = mongo.client();
  }

  @AfterAll
  static void stop() {
    client.close();
    mongo.close();
  }

  @Override
  protected LeaseStore createLeaseStore() {
    return MongoLeaseStore.builder(client.getDatabase("locks")).collection("lock_two_routers").build();
  }
}
