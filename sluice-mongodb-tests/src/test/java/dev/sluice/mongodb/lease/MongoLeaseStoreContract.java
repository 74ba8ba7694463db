package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import java.time.Clock;

/**
 * The conformance suite on a MongoDB database the subclass provides: the embedded server as it
 * is, one staged by a test-kit control, or a real deployment.
 */
abstract class MongoLeaseStoreContract extends LeaseStoreContract {

  /** The database the stores under test keep their lease documents in. */
  protected abstract MongoDatabase database();

  @Override
  protected LeaseStore createStore(Clock processClock) {
    // The MongoDB store takes no process clock: every time it uses comes from the server, so
    // there is nothing to hand the skewed clock to. The contract's skew tests therefore pass by
    // construction; MongoLeaseStoreTest.serverClockSkewChangesNothing skews the database's clock
    // instead, which is the same relative skew seen from the other side.
    return MongoLeaseStore.builder(database()).build();
  }

  @Override
  protected void deleteRecordDirectly(String name) {
    // What the optional TTL clean-up or an operator does.
    long deleted = database().getCollection(MongoLeaseStore.DEFAULT_COLLECTION)
        .deleteOne(Filters.eq("_id", name)).getDeletedCount();
    assertThat(deleted).as("documents deleted for %s", name).isEqualTo(1);
  }
}
