package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.lease.Lease;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite on a staged sharded cluster whose routers' clocks differ: successive
 * commands get a {@code $$NOW} 5 s apart (a mongos resolves {@code $$NOW} from its own clock and
 * sends it to the shard with the command) and successive {@code hello} replies report clocks 2 s
 * apart. No lease decision may depend on which router carries it (ADR 0083): when expiry was
 * judged with {@code $$NOW} in each statement, a taker routed through the router ahead took live
 * leases and a record re-created through the router behind repeated epochs. Needs the embedded
 * server's test-kit control, so it starts its own even under {@code -Dsluice.mongodb.uri}.
 */
class MongoLeaseStoreOnTwoClocksTest extends MongoLeaseStoreContract {
  private static final Duration AHEAD = Duration.ofSeconds(5);
  private static EmbeddedMongo mongo;
  private static MongoClient client;
  private static MongoDatabase database;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start()
        .routerClockOffsets(Duration.ZERO, AHEAD)
        .helloClockOffsets(Duration.ZERO, Duration.ofSeconds(2));
    client = mongo.client();
    database = client.getDatabase("sluice_lease_two_clocks");
  }

  @AfterAll
  static void stop() {
    client.close();
    mongo.close();
  }

  @Override
  protected MongoDatabase database() {
    return database;
  }

  /**
   * The holder renews a 3 s lease every 500 ms while a taker keeps trying; commands alternate
   * between a router on the true clock and one 5 s ahead, so both reach each router in turn. No
   * attempt may take the lease while it is renewed. (Judged by {@code $$NOW}, an attempt through
   * the router ahead saw the lease expired at once: its expiry, set through the true router, was
   * 3 s after the true time, which the router ahead had passed.)
   */
  @Test
  void aTakerThroughARouterAheadNeverTakesALeaseTheHolderRenewsThroughATrueOne() {
    try (EmbeddedMongo routers = EmbeddedMongo.start().routerClockOffsets(Duration.ZERO, AHEAD);
        MongoClient c = routers.client()) {
      MongoLeaseStore holder = MongoLeaseStore.builder(c.getDatabase("routers")).build();
      MongoLeaseStore taker = MongoLeaseStore.builder(c.getDatabase("routers")).build();
      Duration lease = Duration.ofSeconds(3);
      Lease held = holder.tryAcquire("renewed#0", "holder", lease).orElseThrow();
      for (int round = 0; round < 12; round++) {
        for (int attempt = 0; attempt < 3; attempt++) {
          assertThat(taker.tryAcquire("renewed#0", "taker", lease))
              .as("round %d, attempt %d: a lease renewed every 500 ms is taken", round, attempt)
              .isEmpty();
        }
        long pause = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
        await().atMost(Duration.ofSeconds(2)).until(() -> System.nanoTime() - pause >= 0);
        held = holder.renew(held, lease);
      }
    }
  }

  /**
   * The holder stops renewing; a taker through the router ahead gets the lease only once the
   * holder's own local deadline (start of its last successful renewal plus the lease, measured on
   * this process's monotonic clock) has passed, whatever router each command went through.
   */
  @Test
  void aTakerGetsTheLeaseOnlyAfterTheHoldersLocalDeadlineWhateverTheRouters() {
    try (EmbeddedMongo routers = EmbeddedMongo.start().routerClockOffsets(AHEAD, Duration.ZERO, AHEAD.negated());
        MongoClient c = routers.client()) {
      MongoLeaseStore store = MongoLeaseStore.builder(c.getDatabase("deadline")).build();
      Duration lease = Duration.ofSeconds(2);
      for (int round = 0; round < 3; round++) {
        String name = uniqueName("deadline");
        Lease held = store.tryAcquire(name, "holder", lease).orElseThrow();
        long lastRenewalStart = System.nanoTime();
        store.renew(held, lease);
        Lease taken = await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(20))
            .until(() -> store.tryAcquire(name, "taker", lease), Optional::isPresent).orElseThrow();
        long takenAfter = System.nanoTime() - lastRenewalStart;
        assertThat(Duration.ofNanos(takenAfter))
            .as("round %d: taken before the holder's local deadline", round)
            .isGreaterThanOrEqualTo(lease);
        assertThat(taken.epoch()).isGreaterThan(held.epoch());
      }
    }
  }

  /**
   * A record deleted and re-created at once, through routers 5 s ahead, on time and 5 s behind in
   * turn: every epoch must be higher than the one before. (Seeded from {@code $$NOW}, a record
   * re-created through the router behind started 10 s of microseconds below the epoch its
   * deletion, judged through the router ahead, had let go.)
   */
  @Test
  void epochsKeepIncreasingWhenARecordIsRecreatedThroughAnotherRouter() {
    try (EmbeddedMongo routers = EmbeddedMongo.start().routerClockOffsets(AHEAD, Duration.ZERO, AHEAD.negated());
        MongoClient c = routers.client()) {
      MongoLeaseStore store = MongoLeaseStore.builder(c.getDatabase("epochs")).build();
      long last = 0;
      for (int round = 0; round < 12; round++) {
        String name = "recreated#" + (round % 2);
        Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();
        assertThat(lease.epoch()).as("round %d", round).isGreaterThan(last);
        last = lease.epoch();
        Lease again = store.tryAcquire(name, "a", LONG).orElseThrow();
        assertThat(again.epoch()).as("round %d, re-acquired", round).isGreaterThan(last);
        last = again.epoch();
        if (round % 2 == 0) {
          assertThat(store.delete(again)).as("round %d: delete", round).isTrue();
        } else {
          store.release(again);
          assertThat(store.deleteIfIdle(name, again.epoch())).as("round %d: deleteIfIdle", round).isTrue();
        }
        Lease recreated = store.tryAcquire(name, "b", LONG).orElseThrow();
        assertThat(recreated.epoch()).as("round %d, re-created", round).isGreaterThan(last);
        last = recreated.epoch();
        assertThat(store.delete(recreated)).isTrue();
      }
    }
  }

  /**
   * Routers a minute apart and a 30 s lease, also on {@code hello}: whichever router a call
   * reaches, a live lease is never taken.
   */
  @Test
  void aLiveLeaseIsNeverTakenWhateverRouterClockAnswers() {
    try (EmbeddedMongo routers = EmbeddedMongo.start()
            .routerClockOffsets(Duration.ZERO, Duration.ofMinutes(1))
            .helloClockOffsets(Duration.ZERO, Duration.ofMinutes(1));
        MongoClient c = routers.client()) {
      MongoLeaseStore store = MongoLeaseStore.builder(c.getDatabase("routers")).build();
      for (int round = 0; round < 10; round++) {
        String name = uniqueName("routers");
        Lease held = store.tryAcquire(name, "a", Duration.ofSeconds(30)).orElseThrow();
        for (int attempt = 0; attempt < 3; attempt++) {
          assertThat(store.tryAcquire(name, "b", Duration.ofSeconds(30)))
              .as("round %d, attempt %d: a lease live for 30 s is taken", round, attempt)
              .isEmpty();
        }
        Lease renewed = store.renew(held, Duration.ofSeconds(30));
        assertThat(Duration.between(held.expiresAt(), renewed.expiresAt()))
            .as("a renewal's expiry comes from the same clock as the acquisition's")
            .isBetween(Duration.ZERO, Duration.ofSeconds(10));
      }
    }
  }
}
