package dev.sluice.mongodb.lease;

import com.mongodb.client.MongoClients;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseFuzz;
import java.util.List;

/** Builds a {@link MongoLeaseStore} in a {@link LeaseFuzz} JVM: args = connection string, db. */
public final class MongoFuzzStoreFactory implements LeaseFuzz.StoreFactory {

  @Override
  public LeaseStore create(List<String> args) {
    // The client lives as long as the fuzzing JVM.
    return MongoLeaseStore.builder(MongoClients.create(args.get(0)).getDatabase(args.get(1)))
        .build();
  }
}
