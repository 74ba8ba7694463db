package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.testkit.lease.LeaseFuzz;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.process.ChildJvm;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two JVMs with 8 threads each contend for one lease for 10 s on the embedded server; the
 * merged ledger must show one owner at a time and strictly increasing epochs.
 */
class MongoLeaseFuzzTest {

  @Test
  void twoJvmsOfEightThreadsNeverHoldTheLeaseAtTheSameTime(@TempDir Path dir) throws Exception {
    Path ledgerA = dir.resolve("a.ledger");
    Path ledgerB = dir.resolve("b.ledger");
    try (EmbeddedMongo mongo = EmbeddedMongo.start();
        ChildJvm a = fuzz(mongo, "jvmA", ledgerA);
        ChildJvm b = fuzz(mongo, "jvmB", ledgerB)) {
      int exitA = a.awaitExit(Duration.ofSeconds(60));
      int exitB = b.awaitExit(Duration.ofSeconds(60));
      if (exitA != 0 || exitB != 0) {
        a.dumpOutput(dir.resolve("a.out"));
        b.dumpOutput(dir.resolve("b.out"));
      }
      assertThat(exitA).as("jvmA output: %s", a.output()).isZero();
      assertThat(exitB).as("jvmB output: %s", b.output()).isZero();

      List<LeaseFuzz.Entry> ledger = LeaseFuzz.read(List.of(ledgerA, ledgerB));
      LeaseFuzz.Summary summary = LeaseFuzz.verify(ledger);
      assertThat(ledger).anyMatch(e -> e.owner().startsWith("jvmA"));
      assertThat(ledger).anyMatch(e -> e.owner().startsWith("jvmB"));
      assertThat(summary.intervals()).as("enough handovers to mean something").isGreaterThan(50);
      System.out.println("lease fuzz: " + summary + "; " + a.output().get(a.output().size() - 1)
          + "; " + b.output().get(b.output().size() - 1));
    }
  }

  private static ChildJvm fuzz(EmbeddedMongo mongo, String id, Path ledger) {
    return ChildJvm.start(
        id,
        LeaseFuzz.class,
        MongoFuzzStoreFactory.class.getName(),
        ledger.toString(),
        id,
        "8",
        "10000",
        "fuzz#0",
        "300",
        mongo.connectionString(),
        "fuzz");
  }
}
