package dev.sluice.mongodb.lock;

import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.lock.LockContract;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The lock conformance suite on MongoDB (the embedded wire-protocol server). */
class MongoLockTest extends LockContract {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Override
  protected LeaseStore createLeaseStore() {
    return MongoLeaseStore.builder(MONGO.client().getDatabase("locks")).collection("lock_contract")
        .build();
  }
}
