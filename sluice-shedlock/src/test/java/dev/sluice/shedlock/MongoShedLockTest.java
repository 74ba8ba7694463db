package dev.sluice.shedlock;

import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** ShedLock's provider suite on MongoDB (embedded server, or -Dsluice.mongodb.uri). */
class MongoShedLockTest extends ShedLockSuite {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Override
  protected LeaseStore createLeaseStore() {
    return MongoLeaseStore.builder(MONGO.client().getDatabase("shedlock"))
        .collection("shedlock_suite").build();
  }
}
