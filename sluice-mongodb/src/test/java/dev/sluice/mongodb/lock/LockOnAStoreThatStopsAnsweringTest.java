package dev.sluice.mongodb.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.sluice.lease.LeaseStore;
import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import dev.sluice.lock.LockTimeoutException;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code acquire(name, maxWait)} must return within {@code maxWait} when the store stops
 * answering (no majority, a network partition), and a lock the store grants after the caller gave
 * up must not stay held by nobody. The hanging store is {@link NeverAnsweringDatabase}, a
 * driver-level FAKE over the embedded MongoDB (or the server of {@code -Dsluice.mongodb.uri}).
 */
class LockOnAStoreThatStopsAnsweringTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private NeverAnsweringDatabase hanging;
  private LockProvider provider;
  private LockProvider other;

  @AfterEach
  void cleanUp() {
    if (hanging != null) {
      hanging.answerAgain();
    }
    if (provider != null) {
      provider.close();
    }
    if (other != null) {
      other.close();
    }
  }

  @Test
  void acquireReturnsWithinMaxWaitAndALateGrantIsReleased() {
    var db = MONGO.freshDatabase();
    hanging = new NeverAnsweringDatabase(db);
    LeaseStore store = MongoLeaseStore.builder(hanging.database()).build();
    provider = LockProvider.on(store).leaseDuration(Duration.ofSeconds(10)).build();
    hanging.stopAnswering();

    long start = System.nanoTime();
    assertTimeoutPreemptively(Duration.ofSeconds(5), () ->
        assertThatThrownBy(() -> provider.acquire("nightly-report", Duration.ofMillis(200)))
            .isInstanceOf(LockTimeoutException.class)
            .hasMessageContaining("nightly-report")
            .hasMessageContaining("the lock store did not answer in time"));
    long tookMillis = (System.nanoTime() - start) / 1_000_000;
    assertThat(tookMillis).as("acquire(name, 200 ms) against a store that never answers (ms)")
        .isLessThan(1_000);

    // The store answers again: the attempt still in flight is granted the lock and must give it
    // back, or nobody could take it for the next 10 s.
    hanging.answerAgain();
    other = LockProvider.on(MongoLeaseStore.builder(db).build()).leaseDuration(Duration.ofSeconds(10)).build();
    await().atMost(Duration.ofSeconds(5)).until(() -> {
      Optional<Lock> taken = other.tryAcquire("nightly-report");
      taken.ifPresent(Lock::close);
      return taken.isPresent();
    });
  }
}
