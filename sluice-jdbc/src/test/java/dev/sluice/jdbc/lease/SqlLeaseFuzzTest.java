package dev.sluice.jdbc.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.testkit.lease.LeaseFuzz;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two JVMs with 4 threads each contend for one lease on the real servers, releasing, deleting
 * and cleaning it up as they go; the merged ledger must show one owner at a time and epochs
 * that never repeat or go back, across every deletion (LeaseFuzz).
 */
class SqlLeaseFuzzTest {

  @Test
  void postgresNeverGrantsTheLeaseTwiceAcrossDeletions(@TempDir Path dir) {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    pg.createDatabase("sluice_test");
    run(pg.jdbcUrl("sluice_test"), dir);
  }

  @Test
  void mariaDbNeverGrantsTheLeaseTwiceAcrossDeletions(@TempDir Path dir) {
    EmbeddedMariaDb maria = EmbeddedMariaDb.shared();
    maria.createDatabase("sluice_test");
    run(maria.jdbcUrl("sluice_test"), dir);
  }

  private static void run(String jdbcUrl, Path dir) {
    String name = "fuzz-" + UUID.randomUUID().toString().substring(0, 8) + "#0";
    LeaseFuzz.Summary summary =
        LeaseFuzz.runInChildJvms(
            SqlFuzzStoreFactory.class,
            List.of(jdbcUrl, "lease_fuzz"),
            dir,
            2,
            4,
            Duration.ofSeconds(6),
            name,
            Duration.ofMillis(300));
    assertThat(summary.owners()).as("threads of both JVMs held it").isGreaterThan(2);
    assertThat(summary.intervals()).as("enough handovers to mean something").isGreaterThan(20);
    System.out.println("lease fuzz on " + jdbcUrl + ": " + summary);
  }
}
