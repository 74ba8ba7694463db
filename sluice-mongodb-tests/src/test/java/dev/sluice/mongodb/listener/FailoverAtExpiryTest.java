package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import org.bson.BsonDocument;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A standby takes a partition over when the crashed holder's lease expires on the store's clock,
 * not at its next scheduled attempt (issue 15 item 4, ADR 0068). The holder is a lease acquired
 * for one second and never renewed, as a SIGKILLed process leaves it; the standby's own acquire
 * interval is 20 s (lease 60 s), so before this change its second attempt came 10-20 s after its
 * first. Against the embedded server, or a real deployment given {@code -Dsluice.mongodb.uri}.
 */
class FailoverAtExpiryTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @Test
  void aStandbyAcquiresWhenTheCrashedHoldersLeaseExpiresNotAnAcquireIntervalLater() {
    String db = "failoverexpiry";
    LeaseStore store = MongoLeaseStore.builder(MONGO.client().getDatabase(db)).build();
    MongoChangeFeed feed = MongoChangeFeed.builder(MONGO.client(), db, "orders").build();
    String lease = "standby/" + feed.stream() + "#0of1";
    long crashedEpoch = store.tryAcquire(lease, "crashed/1@host/x#1", Duration.ofSeconds(1)).orElseThrow().epoch();

    long start = System.nanoTime();
    try (Listener<BsonDocument> standby = Listener.builder(feed, store).group("standby")
        .leaseDuration(Duration.ofSeconds(60))
        .handler((change, fence) -> { })
        .build().start()) {
      await().atMost(Duration.ofSeconds(30))
          .until(() -> standby.status().get(0).state() == PartitionState.ACTIVE);
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      // The lease expires 1 s after it was taken; the first scheduled attempt after the one at
      // start would be at least 10 s (half the acquire interval) later.
      assertThat(took).as("time to take over the crashed holder's partition").isLessThan(Duration.ofSeconds(8));
      assertThat(store.read(lease).orElseThrow().epoch()).isGreaterThan(crashedEpoch);
    }
  }
}
