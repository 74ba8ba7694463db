package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.Main;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 12 items 3 and 5: {@code sluice status} shows how far each checkpoint is behind the source
 * and how much oplog history is left behind it, and a misspelt database is an error that says where
 * the lease records are, not an empty table with exit code 0.
 */
class StatusCommandTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Test
  void showsLagAndHistoryLeftPerPartitionAndNamesTheDatabaseWhereTheRecordsAre() {
    String db = "statusshop";
    // The oplog's oldest entry, then a checkpoint a little later.
    MONGO.client().getDatabase(db).getCollection("orders").insertOne(new Document("_id", "o1"));
    LeaseStore leases = MongoLeaseStore.builder(MONGO.client().getDatabase(db)).build();
    Lease lease = leases.tryAcquire("g/" + db + ".orders#0of1", "a/1@h/x#1", Duration.ofSeconds(30)).orElseThrow();
    Instant checkpointTime = Instant.now().plusSeconds(1);
    leases.commit(lease, new Position("{\"_data\": \"82AB\"}", checkpointTime));

    CliRun ok = CliRun.sluice("status", "--mongo", MONGO.connectionString(), "--database", db);
    assertThat(ok.exit()).as(ok.err()).isZero();
    List<String> lines = ok.out().lines().toList();
    assertThat(lines.get(0)).contains("LAG", "HISTORY LEFT");
    String row = lines.stream().filter(l -> l.startsWith("partition")).findFirst().orElseThrow();
    // The oplog's oldest entry is at or before the checkpoint: some history is left, in seconds.
    assertThat(row).containsPattern("\\b\\d+ s\\s+\\d+ s\\s");

    CliRun byStream = CliRun.sluice("status", "--mongo", MONGO.connectionString(), "--database", db, "--stream", db + ".ord");
    assertThat(byStream.exit()).as(byStream.err()).isZero();
    assertThat(byStream.out()).contains(db + ".orders");
    CliRun otherStream = CliRun.sluice("status", "--mongo", MONGO.connectionString(), "--database", db, "--stream", "shop.x");
    assertThat(otherStream.exit()).isEqualTo(Main.EXIT_CONFIGURATION);

    CliRun misspelt = CliRun.sluice("status", "--mongo", MONGO.connectionString(), "--database", "statusshoop");
    assertThat(misspelt.exit()).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(misspelt.err().strip().lines()).hasSize(1);
    assertThat(misspelt.err()).contains("no lease records in statusshoop.sluice_leases",
        "databases with a sluice_leases collection: ", db);

    CliRun tooFast = CliRun.sluice("status", "--mongo", MONGO.connectionString(), "--database", db, "--watch", "10ms");
    assertThat(tooFast.exit()).isEqualTo(Main.EXIT_USAGE);
    assertThat(tooFast.err()).contains("--watch", "at least 500ms");

    CliRun notADuration = CliRun.sluice("status", "--mongo", MONGO.connectionString(), "--database", db, "--watch", "often");
    assertThat(notADuration.exit()).isEqualTo(Main.EXIT_USAGE);
    assertThat(notADuration.err()).contains("--watch", "often");
  }
}
