package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.testkit.lease.LeaseFuzz;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link MongoLeaseFuzzTest} on a staged sharded cluster whose routers' clocks are 2 s apart
 * (successive commands get the {@code $$NOW} of one router, then of the other) with 300 ms leases:
 * the merged ledger of two JVMs must still show one owner at a time and strictly increasing
 * epochs (ADR 0083). Starts its own embedded server even under {@code -Dsluice.mongodb.uri}.
 */
class MongoLeaseFuzzOnTwoRouterClocksTest {

  @Test
  void twoJvmsNeverHoldTheLeaseAtTheSameTimeWhateverRouterCarriesEachCommand(@TempDir Path dir) {
    try (EmbeddedMongo mongo = EmbeddedMongo.start().routerClockOffsets(Duration.ZERO, Duration.ofSeconds(2))) {
      LeaseFuzz.Summary summary =
          LeaseFuzz.runInChildJvms(
              MongoFuzzStoreFactory.class,
              List.of(mongo.connectionString(), "fuzz_two_routers"),
              dir,
              2,
              8,
              Duration.ofSeconds(15),
              "fuzz#0",
              Duration.ofMillis(300));
      assertThat(summary.owners()).as("threads of both JVMs held it").isGreaterThan(2);
      assertThat(summary.intervals()).as("enough handovers to mean something").isGreaterThan(10);
      System.out.println("lease fuzz on two router clocks: " + summary);
    }
  }
}
