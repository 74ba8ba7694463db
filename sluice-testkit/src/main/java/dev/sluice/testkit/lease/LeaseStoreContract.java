package dev.sluice.testkit.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Conformance suite every {@link LeaseStore} must pass. Extend it, start the real server in the
 * subclass, and implement {@link #createStore(Clock)} and {@link #deleteRecordDirectly(String)}.
 * Never skips: a server that cannot start fails the suite.
 */
public abstract class LeaseStoreContract {

  /** How long the leases in the expiry tests last: short, so the suite stays fast. */
  protected static final Duration SHORT = Duration.ofMillis(1500);

  protected static final Duration LONG = Duration.ofMinutes(5);

  /**
   * A store over the shared server. {@code processClock} is the process's clock: the store must
   * judge expiry by the database's clock, so a skewed process clock must change nothing.
   */
  protected abstract LeaseStore createStore(Clock processClock);

  /**
   * Deletes {@code name}'s record behind the store's back, as an operator's {@code DELETE}, a
   * TTL index or a clean-up script would: epochs granted afterwards must still be higher than
   * every epoch granted before.
   */
  protected abstract void deleteRecordDirectly(String name);

  /**
   * {@link #deleteRecordDirectly}, once the store's clock has moved past the moment of the call.
   * Deletions behind the store's back (a TTL monitor, an operator) never follow the last grant
   * within the store clock's resolution, and a store that seeds epochs from its clock relies on
   * that: a record deleted and re-created within one tick could otherwise start at an epoch it
   * already granted. {@link LeaseStore#delete} and {@link LeaseStore#deleteIfIdle} need no such
   * help: the store itself must make them safe.
   */
  protected void deleteRecordBehindTheStoresBack(LeaseStore store, String name) {
    Instant seen = store.now();
    await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(1))
        .until(() -> store.now().isAfter(seen));
    deleteRecordDirectly(name);
  }

  /** Polls until {@code owner} takes {@code name} on {@code store} for {@link #LONG}: once the lease ran out. */
  private static Lease awaitTakeover(LeaseStore store, String name, String owner) {
    return await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50))
        .until(() -> store.tryAcquire(name, owner, LONG), Optional::isPresent).orElseThrow();
  }

  protected LeaseStore store() {
    return createStore(Clock.systemUTC());
  }

  /** A name no other test uses, so tests can share one server and table. */
  protected static String uniqueName(String what) {
    return "tck-" + what + "-" + UUID.randomUUID().toString().substring(0, 8) + "#0";
  }

  private static Position position(int i) {
    return new Position("pos-" + i, Instant.parse("2026-01-01T00:00:00Z").plusSeconds(i));
  }

  @Test
  void firstAcquireGrantsAPositiveEpochAndNoCheckpoint() {
    LeaseStore store = store();
    String name = uniqueName("first");

    Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();

    assertThat(lease.name()).isEqualTo(name);
    assertThat(lease.owner()).isEqualTo("a");
    assertThat(lease.epoch()).isPositive();
    assertThat(lease.checkpoint()).isNull();
    assertThat(lease.expiresAt()).isAfter(store.now());
  }

  @Test
  void anotherOwnerGetsEmptyWhileTheLeaseIsHeld() {
    LeaseStore store = store();
    String name = uniqueName("held");
    Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();

    assertThat(store.tryAcquire(name, "b", LONG)).isEmpty();
    assertThat(store.read(name)).get().satisfies(r -> {
      assertThat(r.owner()).isEqualTo("a");
      assertThat(r.epoch()).isEqualTo(lease.epoch());
      assertThat(r.isHeld()).isTrue();
    });
  }

  @Test
  void renewalExtendsTheLeaseAndKeepsTheEpoch() {
    LeaseStore store = store();
    String name = uniqueName("renew");
    Lease lease = store.tryAcquire(name, "a", Duration.ofSeconds(30)).orElseThrow();

    Lease renewed = store.renew(lease, LONG);

    assertThat(renewed.epoch()).isEqualTo(lease.epoch());
    assertThat(renewed.expiresAt()).isAfter(lease.expiresAt());
    assertThat(store.read(name).orElseThrow().expiresAt()).isEqualTo(renewed.expiresAt());
  }

  @Test
  void anExpiredLeaseIsTakenOverWithAHigherEpochAndTheOldHolderIsFenced() {
    LeaseStore store = store();
    String name = uniqueName("takeover");
    Lease old = store.tryAcquire(name, "a", SHORT).orElseThrow();
    store.commit(old, position(1));

    Lease taken = awaitTakeover(store, name, "b");

    assertThat(taken.epoch()).isGreaterThan(old.epoch());
    assertThat(taken.checkpoint()).isEqualTo(position(1));
    assertThatThrownBy(() -> store.renew(old, LONG)).isInstanceOf(LeaseLostException.class);
    assertThatThrownBy(() -> store.commit(old, position(2))).isInstanceOf(LeaseLostException.class);
    assertThat(store.release(old)).isFalse();
    LeaseRecord record = store.read(name).orElseThrow();
    assertThat(record.owner()).isEqualTo("b");
    assertThat(record.epoch()).isEqualTo(taken.epoch());
    assertThat(record.checkpoint()).isEqualTo(position(1));
  }

  @Test
  void aLeaseIsNotTakenOverBeforeItExpires() {
    LeaseStore store = store();
    String name = uniqueName("not-before");
    Lease lease = store.tryAcquire(name, "a", Duration.ofSeconds(3)).orElseThrow();

    // Keep trying while the store's clock says the lease is live; none may succeed.
    while (store.now().isBefore(lease.expiresAt().minusMillis(300))) {
      assertThat(store.tryAcquire(name, "b", LONG)).isEmpty();
    }
  }

  @Test
  void theHolderReacquiringStartsANewEpochThatFencesItsPreviousIncarnation() {
    LeaseStore store = store();
    String name = uniqueName("reacquire");
    Lease first = store.tryAcquire(name, "a", LONG).orElseThrow();

    Lease second = store.tryAcquire(name, "a", LONG).orElseThrow();

    assertThat(second.epoch()).isGreaterThan(first.epoch());
    assertThatThrownBy(() -> store.commit(first, position(1))).isInstanceOf(LeaseLostException.class);
    store.commit(second, position(2));
    assertThat(store.read(name).orElseThrow().checkpoint()).isEqualTo(position(2));
  }

  @Test
  void commitStoresTheCheckpointForTheNextOwner() {
    LeaseStore store = store();
    String name = uniqueName("checkpoint");
    Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();

    Lease committed = store.commit(lease, position(7));
    assertThat(committed.checkpoint()).isEqualTo(position(7));
    assertThat(store.release(committed)).isTrue();

    Lease next = store.tryAcquire(name, "b", LONG).orElseThrow();
    assertThat(next.checkpoint()).isEqualTo(position(7));
    assertThat(next.checkpoint().time()).isEqualTo(position(7).time());
  }

  @Test
  void releaseLetsAnotherOwnerAcquireAtOnceWithAHigherEpoch() {
    LeaseStore store = store();
    String name = uniqueName("release");
    Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();

    assertThat(store.release(lease)).isTrue();
    assertThat(store.release(lease)).as("releasing twice is harmless").isFalse();
    assertThat(store.read(name).orElseThrow().isHeld()).isFalse();

    Lease next = store.tryAcquire(name, "b", LONG).orElseThrow();
    assertThat(next.epoch()).isGreaterThan(lease.epoch());
  }

  @Test
  void aStaleHolderCannotReleaseTheNewHoldersLease() {
    LeaseStore store = store();
    String name = uniqueName("stale-release");
    Lease old = store.tryAcquire(name, "a", SHORT).orElseThrow();
    Lease current = awaitTakeover(store, name, "b");

    assertThat(store.release(old)).isFalse();

    LeaseRecord record = store.read(name).orElseThrow();
    assertThat(record.owner()).isEqualTo("b");
    assertThat(record.isHeld()).isTrue();
    assertThat(store.tryAcquire(name, "c", LONG)).isEmpty();
    store.renew(current, LONG);
  }

  @Test
  void epochsStrictlyIncreaseAcrossManyHandovers() {
    LeaseStore store = store();
    String name = uniqueName("epochs");
    long last = 0;
    for (int i = 0; i < 20; i++) {
      Lease lease = store.tryAcquire(name, "owner-" + (i % 3), LONG).orElseThrow();
      assertThat(lease.epoch()).isGreaterThan(last);
      last = lease.epoch();
      assertThat(store.release(lease)).isTrue();
    }
  }

  @Test
  void exactlyOneOfManyConcurrentAcquirersOfAFreshNameWins() throws Exception {
    LeaseStore store = store();
    int threads = 8;
    for (int round = 0; round < 5; round++) {
      String name = uniqueName("race");
      CountDownLatch start = new CountDownLatch(1);
      ExecutorService pool = Executors.newFixedThreadPool(threads);
      try {
        List<Future<Optional<Lease>>> results = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          String owner = "racer-" + t;
          Callable<Optional<Lease>> attempt = () -> {
            start.await();
            return store.tryAcquire(name, owner, LONG);
          };
          results.add(pool.submit(attempt));
        }
        start.countDown();
        long winners = 0;
        for (Future<Optional<Lease>> f : results) {
          // A lost insert race must be "not acquired", never an exception.
          if (f.get(30, TimeUnit.SECONDS).isPresent()) {
            winners++;
          }
        }
        assertThat(winners).as("winners of round %d", round).isEqualTo(1);
      } finally {
        pool.shutdownNow();
      }
    }
  }

  @Test
  void aProcessClockAnHourAheadCannotStealALiveLease() {
    LeaseStore honest = store();
    LeaseStore ahead = createStore(Clock.offset(Clock.systemUTC(), Duration.ofHours(1)));
    String name = uniqueName("skew-ahead");
    honest.tryAcquire(name, "a", Duration.ofMinutes(1)).orElseThrow();

    assertThat(ahead.tryAcquire(name, "b", LONG)).isEmpty();
    assertThat(Duration.between(Instant.now(), ahead.now()).abs())
        .as("the store's now() is the database's clock, not the skewed process clock")
        .isLessThan(Duration.ofMinutes(5));
  }

  @Test
  void aProcessClockAnHourBehindCannotKeepAnExpiredLease() {
    LeaseStore behind = createStore(Clock.offset(Clock.systemUTC(), Duration.ofHours(-1)));
    LeaseStore honest = store();
    String name = uniqueName("skew-behind");
    Lease lease = behind.tryAcquire(name, "a", SHORT).orElseThrow();

    assertThat(Duration.between(honest.now(), lease.expiresAt()))
        .as("expiry is set on the database clock")
        .isLessThanOrEqualTo(SHORT.plusSeconds(5));
    Lease taken = awaitTakeover(honest, name, "b");
    assertThat(taken.epoch()).isGreaterThan(lease.epoch());
    assertThatThrownBy(() -> behind.renew(lease, LONG)).isInstanceOf(LeaseLostException.class);
  }

  @Test
  void readAndListShowWhatTheStoreHolds() {
    LeaseStore store = store();
    String prefix = "tck-list-" + UUID.randomUUID().toString().substring(0, 8);
    Lease p0 = store.tryAcquire(prefix + "#0", "a", LONG).orElseThrow();
    store.tryAcquire(prefix + "#1", "b", LONG).orElseThrow();
    store.commit(p0, position(3));
    store.tryAcquire(uniqueName("other"), "c", LONG).orElseThrow();

    List<LeaseRecord> records = store.list(prefix);

    assertThat(records).extracting(LeaseRecord::name).containsExactly(prefix + "#0", prefix + "#1");
    assertThat(records.get(0).checkpoint()).isEqualTo(position(3));
    assertThat(records.get(1).owner()).isEqualTo("b");
    assertThat(store.read(uniqueName("never"))).isEmpty();
  }

  // ------------------------------------------------------------------ delete and deleteIfIdle

  @Test
  void theHolderDeletingItsLeaseRemovesTheRecordAndFencesItself() {
    LeaseStore store = store();
    String name = uniqueName("delete");
    Lease lease = store.commit(store.tryAcquire(name, "a", LONG).orElseThrow(), position(1));

    assertThat(store.delete(lease)).isTrue();

    assertThat(store.read(name)).isEmpty();
    assertThat(store.delete(lease)).as("deleting twice is harmless").isFalse();
    assertThatThrownBy(() -> store.renew(lease, LONG)).isInstanceOf(LeaseLostException.class);
    assertThatThrownBy(() -> store.commit(lease, position(2)))
        .isInstanceOf(LeaseLostException.class);
    assertThat(store.release(lease)).isFalse();
    assertThat(store.read(name)).as("no fenced write re-creates the record").isEmpty();
  }

  @Test
  void aStaleOwnerOrEpochCannotDeleteTheRecord() {
    LeaseStore store = store();
    String name = uniqueName("stale-delete");
    Lease first = store.tryAcquire(name, "a", LONG).orElseThrow();
    Lease second = store.tryAcquire(name, "a", LONG).orElseThrow();
    Lease impostor = new Lease(name, "b", second.epoch(), second.expiresAt(), null);

    assertThat(store.delete(first)).as("previous epoch of the same owner").isFalse();
    assertThat(store.delete(impostor)).as("same epoch, other owner").isFalse();
    assertThat(store.read(name)).get().satisfies(r -> {
      assertThat(r.owner()).isEqualTo("a");
      assertThat(r.epoch()).isEqualTo(second.epoch());
      assertThat(r.isHeld()).isTrue();
    });
    store.renew(second, LONG);

    assertThat(store.release(second)).isTrue();
    assertThat(store.delete(second)).as("a released lease is no longer held by anyone").isFalse();
    assertThat(store.read(name)).isPresent();
    assertThat(store.delete(new Lease(uniqueName("never"), "a", 1, Instant.now(), null)))
        .isFalse();
  }

  @Test
  void deleteIfIdleNeverDeletesAHeldLease() {
    LeaseStore store = store();
    String name = uniqueName("idle-held");
    Lease lease = store.commit(store.tryAcquire(name, "a", LONG).orElseThrow(), position(4));

    assertThat(store.deleteIfIdle(name, lease.epoch())).isFalse();
    assertThat(store.deleteIfIdle(name, lease.epoch() - 1)).isFalse();
    assertThat(store.deleteIfIdle(name, lease.epoch() + 1)).isFalse();

    LeaseRecord record = store.read(name).orElseThrow();
    assertThat(record.isHeld()).isTrue();
    assertThat(record.epoch()).isEqualTo(lease.epoch());
    assertThat(record.checkpoint()).isEqualTo(position(4));
    store.renew(lease, LONG);
    store.commit(lease, position(5));
  }

  @Test
  void deleteIfIdleDeletesAReleasedRecordOnlyAtTheEpochItWasRead() {
    LeaseStore store = store();
    String name = uniqueName("idle-released");
    Lease lease = store.commit(store.tryAcquire(name, "a", LONG).orElseThrow(), position(1));
    assertThat(store.release(lease)).isTrue();

    assertThat(store.deleteIfIdle(name, lease.epoch() - 1)).isFalse();
    assertThat(store.deleteIfIdle(name, lease.epoch() + 1)).isFalse();
    assertThat(store.read(name)).isPresent();

    assertThat(store.deleteIfIdle(name, lease.epoch())).isTrue();
    assertThat(store.read(name)).isEmpty();
    assertThat(store.deleteIfIdle(name, lease.epoch())).isFalse();
    assertThat(store.deleteIfIdle(uniqueName("never"), 1)).isFalse();
  }

  @Test
  void deleteIfIdleDeletesALeaseThatExpiredOnTheStoresClock() {
    LeaseStore store = store();
    String name = uniqueName("idle-expired");
    Lease lease = store.tryAcquire(name, "a", SHORT).orElseThrow();
    await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50))
        .until(() -> store.now().isAfter(lease.expiresAt()));

    assertThat(store.deleteIfIdle(name, lease.epoch())).isTrue();

    assertThat(store.read(name)).isEmpty();
    assertThatThrownBy(() -> store.renew(lease, LONG)).isInstanceOf(LeaseLostException.class);
  }

  @Test
  void anAcquisitionBetweenReadingAnIdleRecordAndDeletingItWins() {
    LeaseStore store = store();
    String name = uniqueName("idle-race");
    Lease old = store.commit(store.tryAcquire(name, "a", LONG).orElseThrow(), position(2));
    store.release(old);
    LeaseRecord idle = store.read(name).orElseThrow();
    assertThat(idle.isHeld()).isFalse();

    Lease current = store.tryAcquire(name, "b", LONG).orElseThrow();

    assertThat(store.deleteIfIdle(name, idle.epoch())).isFalse();
    LeaseRecord record = store.read(name).orElseThrow();
    assertThat(record.owner()).isEqualTo("b");
    assertThat(record.epoch()).isEqualTo(current.epoch());
    assertThat(record.checkpoint()).isEqualTo(position(2));
    store.commit(current, position(3));
  }

  @Test
  void concurrentAcquisitionAndDeleteIfIdleNeverLoseTheAcquiredLease() throws Exception {
    LeaseStore store = store();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      for (int round = 0; round < 20; round++) {
        String name = uniqueName("idle-concurrent");
        Lease idle = store.tryAcquire(name, "a", LONG).orElseThrow();
        store.release(idle);
        CountDownLatch start = new CountDownLatch(1);
        Future<Optional<Lease>> acquired = pool.submit(() -> {
          start.await();
          return store.tryAcquire(name, "b", LONG);
        });
        Future<Boolean> deleted = pool.submit(() -> {
          start.await();
          return store.deleteIfIdle(name, idle.epoch());
        });
        start.countDown();
        Optional<Lease> won = acquired.get(30, TimeUnit.SECONDS);
        boolean gone = deleted.get(30, TimeUnit.SECONDS);

        if (won.isPresent()) {
          Lease lease = won.get();
          assertThat(lease.epoch()).as("round %d", round).isGreaterThan(idle.epoch());
          assertThat(store.read(name)).as("round %d (deleted: %s)", round, gone).get()
              .satisfies(r -> {
                assertThat(r.owner()).isEqualTo("b");
                assertThat(r.epoch()).isEqualTo(lease.epoch());
                assertThat(r.isHeld()).isTrue();
              });
          store.renew(lease, LONG);
        } else {
          // Losing to a deletion is contention, never an error; the name is free again.
          assertThat(gone).as("round %d: only the deletion can have beaten b", round).isTrue();
          assertThat(store.tryAcquire(name, "b", LONG).orElseThrow().epoch())
              .isGreaterThan(idle.epoch());
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void epochsKeepIncreasingAfterTheRecordIsDeleted() {
    LeaseStore store = store();
    String name = uniqueName("epoch-after-delete");
    long last = 0;
    for (int i = 0; i < 3; i++) {
      Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();
      assertThat(lease.epoch()).isGreaterThan(last);
      last = lease.epoch();
      store.release(lease);
    }
    assertThat(store.deleteIfIdle(name, last)).isTrue();
    Lease afterIdleDelete = store.tryAcquire(name, "a", LONG).orElseThrow();
    assertThat(afterIdleDelete.epoch()).as("after deleteIfIdle").isGreaterThan(last);

    assertThat(store.delete(afterIdleDelete)).isTrue();
    Lease afterDelete = store.tryAcquire(name, "b", LONG).orElseThrow();
    assertThat(afterDelete.epoch()).as("after delete").isGreaterThan(afterIdleDelete.epoch());

    store.release(afterDelete);
    deleteRecordBehindTheStoresBack(store, name);
    assertThat(store.read(name)).isEmpty();
    Lease afterRawDelete = store.tryAcquire(name, "c", LONG).orElseThrow();
    assertThat(afterRawDelete.epoch()).as("after a deletion behind the store's back")
        .isGreaterThan(afterDelete.epoch());
  }

  @Test
  void aRecordDeletedAndRecreatedAtOnceNeverRepeatsAnEpoch() {
    // Within one tick of a store clock that seeds epochs, as fast as the store can go.
    LeaseStore store = store();
    for (int i = 0; i < 30; i++) {
      String name = uniqueName("quick-delete");
      Lease first = store.tryAcquire(name, "a", LONG).orElseThrow();
      assertThat(store.delete(first)).isTrue();
      Lease second = store.tryAcquire(name, "a", LONG).orElseThrow();
      assertThat(second.epoch()).as("round %d, after delete", i).isGreaterThan(first.epoch());
      assertThat(store.release(second)).isTrue();
      assertThat(store.deleteIfIdle(name, second.epoch())).isTrue();
      Lease third = store.tryAcquire(name, "b", LONG).orElseThrow();
      assertThat(third.epoch()).as("round %d, after deleteIfIdle", i)
          .isGreaterThan(second.epoch());
    }
  }

  @Test
  void aHeldRecordDeletedBehindTheStoresBackIsLostToItsHolder() {
    LeaseStore store = store();
    String name = uniqueName("raw-delete-held");
    Lease lease = store.tryAcquire(name, "a", LONG).orElseThrow();

    deleteRecordBehindTheStoresBack(store, name);

    assertThatThrownBy(() -> store.commit(lease, position(1)))
        .isInstanceOf(LeaseLostException.class);
    Lease next = store.tryAcquire(name, "b", LONG).orElseThrow();
    assertThat(next.epoch()).isGreaterThan(lease.epoch());
    assertThatThrownBy(() -> store.renew(lease, LONG)).isInstanceOf(LeaseLostException.class);
  }
}
