package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.testkit.lease.LeaseFuzz;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two JVMs with 8 threads each contend for one lease for 10 s on the embedded server; the
 * merged ledger must show one owner at a time and strictly increasing epochs (LeaseFuzz).
 */
class MongoLeaseFuzzTest {

  @Test
  void twoJvmsOfEightThreadsNeverHoldTheLeaseAtTheSameTime(@TempDir Path dir) {
    try (InMemoryMongo mongo = new InMemoryMongo()) { // or -Dsluice.mongodb.uri
      LeaseFuzz.Summary summary =
          LeaseFuzz.runInChildJvms(
              MongoFuzzStoreFactory.class,
              List.of(mongo.uri(), mongo.freshDatabase().getName()),
              dir,
              2,
              8,
              Duration.ofSeconds(10),
              "fuzz#0",
              Duration.ofMillis(300));
      assertThat(summary.owners()).as("threads of both JVMs held it").isGreaterThan(2);
      assertThat(summary.intervals()).as("enough handovers to mean something").isGreaterThan(30);
      System.out.println("lease fuzz: " + summary);
    }
  }
}
