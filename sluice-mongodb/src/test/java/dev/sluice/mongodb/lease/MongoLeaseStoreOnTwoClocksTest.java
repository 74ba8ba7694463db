package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import dev.sluice.lease.Lease;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite where successive {@code hello} replies come from two clocks 2 s apart, as
 * when each call reaches another mongos router of a sharded cluster. Expiry is judged with
 * {@code $$NOW} inside each statement, where the lease document lives, so the suite stays green;
 * when it was judged by {@code hello}'s {@code localTime} read before each write, a lease could be
 * taken while it was live on the other clock (ADR 0011). Needs the embedded server's test-kit
 * control, so it starts its own even under {@code -Dsluice.mongodb.uri}.
 */
class MongoLeaseStoreOnTwoClocksTest extends MongoLeaseStoreContract {
  private static EmbeddedMongo mongo;
  private static MongoClient client;
  private static MongoDatabase database;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start().helloClockOffsets(Duration.ZERO, Duration.ofSeconds(2));
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
   * Routers a minute apart and a 30 s lease: whichever router a call reaches, a live lease is
   * never taken, because no router's clock takes part in the decision. (Judged by the clock of
   * the router answering {@code hello}, the second owner took it as soon as its call reached the
   * router a minute ahead.)
   */
  @Test
  void aLiveLeaseIsNeverTakenWhateverRouterClockAnswers() {
    try (EmbeddedMongo routers = EmbeddedMongo.start().helloClockOffsets(Duration.ZERO, Duration.ofMinutes(1));
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
      assertThat(((DefaultMongoLeaseStore) store).judgesExpiryInStatement()).isTrue();
    }
  }
}
