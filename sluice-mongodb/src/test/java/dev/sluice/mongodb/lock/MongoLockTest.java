package dev.sluice.mongodb.lock;

import com.mongodb.client.MongoClient;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.lock.LockContract;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The lock conformance suite on MongoDB (the embedded wire-protocol server). */
class MongoLockTest extends LockContract {
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
  protected LeaseStore createLeaseStore() {
    return MongoLeaseStore.builder(client.getDatabase("locks")).collection("lock_contract")
        .build();
  }
}
