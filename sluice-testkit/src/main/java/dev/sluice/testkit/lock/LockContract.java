package dev.sluice.testkit.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import dev.sluice.lock.LockTimeoutException;
import dev.sluice.lock.TimedLock;
import dev.sluice.Ticker;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Conformance suite for distributed locks on a {@link LeaseStore}: every backend (MongoDB,
 * PostgreSQL, MariaDB) extends it with a store over its real server. Never skips.
 *
 * <p>A holder that "dies" or "is paused" is simulated here inside one JVM (a lease taken
 * directly in the store that nobody extends; a store whose renewals are cut off, as by a network
 * partition). The real SIGKILL/SIGSTOP of a holder process is in {@code LockFuzzAndCrash}.
 */
public abstract class LockContract {

  /** Long enough to never lapse by accident on a loaded 2-core machine. */
  protected static final Duration LEASE = Duration.ofSeconds(3);
  protected static final Duration EXTEND = Duration.ofMillis(400);
  /** For tests that wait for an expiry. */
  protected static final Duration SHORT_LEASE = Duration.ofMillis(1200);

  private final List<LockProvider> providers = new CopyOnWriteArrayList<>();

  /** A store over the shared real server; may be a new instance per call. */
  protected abstract LeaseStore createLeaseStore();

  @AfterEach
  void closeProviders() {
    providers.forEach(LockProvider::close);
  }

  protected LockProvider provider(LeaseStore store, Duration lease, Duration extend, Ticker ticker) {
    LockProvider p = LockProvider.on(store).leaseDuration(lease).extendEvery(extend).ticker(ticker)
        .backoff(Duration.ofMillis(10), Duration.ofMillis(100)).build();
    providers.add(p);
    return p;
  }

  protected LockProvider provider() {
    return provider(createLeaseStore(), LEASE, EXTEND, Ticker.system());
  }

  protected static String uniqueName(String what) {
    return "lck-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  // ------------------------------------------------------------------ mutual exclusion

  @Test
  void aHeldLockIsNotGrantedToAnotherProviderNorToAnotherThreadOfTheSameProvider() {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("excl");

    try (Lock lock = a.tryAcquire(name).orElseThrow()) {
      assertThat(lock.isHeld()).isTrue();
      assertThat(lock.name()).isEqualTo(name);
      assertThat(b.tryAcquire(name)).isEmpty();
      assertThat(a.tryAcquire(name)).as("not re-entrant: a second acquisition would let two "
          + "threads of one process in").isEmpty();
      assertThat(a.tryAcquire(uniqueName("other"))).as("other names are independent").isPresent();
    }
  }

  @Test
  void contendingThreadsOfTwoProvidersNeverOverlapAndSeeStrictlyIncreasingTokens()
      throws Exception {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("contend");
    AtomicInteger inside = new AtomicInteger();
    AtomicInteger overlaps = new AtomicInteger();
    List<Long> tokens = new CopyOnWriteArrayList<>();
    int threads = 6;
    int rounds = 8;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        LockProvider p = t % 2 == 0 ? a : b;
        futures.add(pool.submit(() -> {
          start.await();
          for (int i = 0; i < rounds; i++) {
            try (Lock lock = p.acquire(name, Duration.ofSeconds(60))) {
              if (inside.incrementAndGet() != 1) {
                overlaps.incrementAndGet();
              }
              tokens.add(lock.token());
              Thread.yield();
              inside.decrementAndGet();
            }
          }
          return null;
        }));
      }
      start.countDown();
      for (Future<?> f : futures) {
        f.get(120, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(overlaps.get()).as("critical sections that overlapped").isZero();
    assertThat(tokens).hasSize(threads * rounds);
    assertThat(tokens).as("tokens in the order the holders got in").isSortedAccordingTo(Long::compare);
    assertThat(tokens).doesNotHaveDuplicates();
  }

  // ------------------------------------------------------------------ extension and expiry

  @Test
  void aHeldLockIsExtendedPastItsLeaseDuration() {
    LockProvider a = provider(createLeaseStore(), SHORT_LEASE, Duration.ofMillis(200),
        Ticker.system());
    LockProvider b = provider();
    String name = uniqueName("extend");
    Lock lock = a.tryAcquire(name).orElseThrow();

    assertKeptFor(3, lock, b, name);
    lock.close();
    assertThat(b.tryAcquire(name)).isPresent();
  }

  @Test
  void theLockOfAHolderThatDiedIsAcquiredAfterExpiryWithAHigherToken() {
    LeaseStore store = createLeaseStore();
    String name = uniqueName("dead");
    // A holder that acquired the lock and then died: nobody ever extends or releases it.
    Lease dead = store.tryAcquire("lock:" + name, "dead-process#1", SHORT_LEASE).orElseThrow();
    // Extended as seldom as a provider may, so the record read right after the grant shows the grant.
    LockProvider p = provider(createLeaseStore(), LEASE, LEASE.dividedBy(3), Ticker.system());

    assertThat(p.tryAcquire(name)).as("not before expiry").isEmpty();
    try (Lock lock = p.acquire(name, Duration.ofSeconds(20))) {
      assertThat(lock.token()).isGreaterThan(dead.epoch());
      // When the store granted it, on the store's clock: the new expiry is that moment plus the
      // lease (or a later extension's). store.now() is no oracle here: between stamps it is an
      // estimate that may be behind the store's clock by a reply's travel time (LeaseStore#now).
      LeaseRecord granted = store.read("lock:" + name).orElseThrow();
      assertThat(granted.epoch()).isEqualTo(lock.token());
      assertThat(granted.expiresAt().minus(LEASE)).as("the grant, on the store's clock")
          .isAfterOrEqualTo(dead.expiresAt());
    }
  }

  // ------------------------------------------------------------------ tokens

  @Test
  void tokensStrictlyIncreaseAcrossReleasesProvidersAndExpiries() {
    LeaseStore store = createLeaseStore();
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("tokens");
    long last = 0;
    for (int i = 0; i < 12; i++) {
      try (Lock lock = (i % 2 == 0 ? a : b).tryAcquire(name).orElseThrow()) {
        assertThat(lock.token()).isGreaterThan(last);
        last = lock.token();
      }
    }
    Lease abandoned = store.tryAcquire("lock:" + name, "abandoned#1", SHORT_LEASE).orElseThrow();
    assertThat(abandoned.epoch()).isGreaterThan(last);
    try (Lock lock = a.acquire(name, Duration.ofSeconds(20))) {
      assertThat(lock.token()).isGreaterThan(abandoned.epoch());
    }
  }

  // ------------------------------------------------------------------ release

  @Test
  void closingReleasesAtOnceAndClosingTwiceIsHarmless() {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("release");
    Lock first = a.tryAcquire(name).orElseThrow();

    first.close();
    assertThat(first.isHeld()).isFalse();
    Lock second = b.tryAcquire(name).orElseThrow();
    first.close();

    assertThat(second.isHeld()).isTrue();
    assertThat(a.tryAcquire(name)).as("the second close released nothing").isEmpty();
    second.close();
  }

  @Test
  void closingALostLockDoesNotReleaseTheNewHoldersLock() {
    CutOffLeaseStore cut = new CutOffLeaseStore(createLeaseStore());
    AtomicReference<SluiceException> lost = new AtomicReference<>();
    LockProvider a = LockProvider.on(cut).leaseDuration(SHORT_LEASE)
        .extendEvery(Duration.ofMillis(200)).onLost((l, cause) -> lost.set(cause)).build();
    providers.add(a);
    LockProvider b = provider();
    String name = uniqueName("stale-close");
    Lock old = a.tryAcquire(name).orElseThrow();

    cut.cutOffRenewals();
    Lock current = b.acquire(name, Duration.ofSeconds(20));
    await().atMost(Duration.ofSeconds(10)).until(() -> lost.get() != null);
    cut.restore();
    old.close();
    old.close();

    assertThat(current.isHeld()).isTrue();
    assertThat(current.token()).isGreaterThan(old.token());
    assertThat(provider().tryAcquire(name)).as("still held by the new holder").isEmpty();
    LeaseRecord record = createLeaseStore().read("lock:" + name).orElseThrow();
    assertThat(record.isHeld()).isTrue();
    assertThat(record.epoch()).isEqualTo(current.token());
  }

  @Test
  void closingTheProviderReleasesItsLocksAndRejectsNewAcquisitions() {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("provider-close");
    Lock lock = a.tryAcquire(name).orElseThrow();

    a.close();

    assertThat(lock.isHeld()).isFalse();
    assertThat(b.tryAcquire(name)).isPresent();
    assertThatThrownBy(() -> a.tryAcquire(uniqueName("x"))).isInstanceOf(SluiceException.class)
        .hasMessageContaining("closed");
  }

  // ------------------------------------------------------------------ waiting

  @Test
  void acquireWaitsForTheHolderToRelease() throws Exception {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("wait");
    Lock held = a.tryAcquire(name).orElseThrow();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      CountDownLatch waiting = new CountDownLatch(1);
      Future<Long> waiter = pool.submit(() -> {
        waiting.countDown();
        try (Lock lock = b.acquire(name, Duration.ofSeconds(30))) {
          return lock.token();
        }
      });
      waiting.await();
      assertThat(waiter.isDone()).isFalse();
      held.close();
      assertThat(waiter.get(30, TimeUnit.SECONDS)).isGreaterThan(held.token());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void aWaitThatRunsOutNamesTheLockTheWaitAndTheHolder() {
    LockProvider a = LockProvider.on(createLeaseStore()).ownerLabel("holder-process")
        .leaseDuration(LEASE).extendEvery(EXTEND).build();
    providers.add(a);
    LockProvider b = provider();
    String name = uniqueName("timeout");
    a.tryAcquire(name).orElseThrow();
    Duration wait = Duration.ofMillis(400);

    long start = System.nanoTime();
    assertThatThrownBy(() -> b.acquire(name, wait))
        .isInstanceOfSatisfying(LockTimeoutException.class, e -> {
          assertThat(e.lockName()).isEqualTo(name);
          assertThat(e.waited()).isEqualTo(wait);
          // the label, then the part unique to the provider, then the acquisition number
          assertThat(e.holder()).get().asString().startsWith("holder-process/").contains("#");
          assertThat(e.getMessage()).contains(name, wait.toString(), "holder-process/");
        });
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(wait);
  }

  @Test
  void twoProvidersWithTheSameOwnerLabelNeverBothHoldALock() {
    // Two instances of one service, configured alike: the label is for people, not the identity.
    LockProvider first = LockProvider.on(createLeaseStore()).ownerLabel("billing")
        .leaseDuration(LEASE).extendEvery(EXTEND).build();
    providers.add(first);
    LockProvider second = LockProvider.on(createLeaseStore()).ownerLabel("billing")
        .leaseDuration(LEASE).extendEvery(EXTEND).build();
    providers.add(second);
    String name = uniqueName("same-label");

    Lock held = first.tryAcquire(name).orElseThrow();
    assertThat(second.tryAcquire(name)).as("a second provider labelled 'billing'").isEmpty();
    assertThat(held.isHeld()).isTrue();
    assertThatThrownBy(() -> second.acquire(name, Duration.ofMillis(200)))
        .isInstanceOfSatisfying(LockTimeoutException.class,
            e -> assertThat(e.holder()).get().asString().startsWith("billing/"));

    held.close();
    Lock next = second.tryAcquire(name).orElseThrow();
    assertThat(next.token()).isGreaterThan(held.token());
    assertThat(first.tryAcquire(name)).isEmpty();
  }

  @Test
  void theDeprecatedOwnerIdIsOnlyALabelToo() {
    @SuppressWarnings("deprecation")
    LockProvider first = LockProvider.on(createLeaseStore()).ownerId("billing")
        .leaseDuration(LEASE).extendEvery(EXTEND).build();
    providers.add(first);
    @SuppressWarnings("deprecation")
    LockProvider second = LockProvider.on(createLeaseStore()).ownerId("billing")
        .leaseDuration(LEASE).extendEvery(EXTEND).build();
    providers.add(second);
    String name = uniqueName("same-owner-id");

    Lock held = first.tryAcquire(name).orElseThrow();
    assertThat(second.tryAcquire(name)).isEmpty();
    assertThat(held.isHeld()).isTrue();
  }

  // ------------------------------------------------------------------ loss

  @Test
  void aHolderCutOffFromTheStoreIsToldItLostTheLock() {
    CutOffLeaseStore cut = new CutOffLeaseStore(createLeaseStore());
    List<SluiceException> causes = new CopyOnWriteArrayList<>();
    List<Lock> lostLocks = new CopyOnWriteArrayList<>();
    LockProvider a = LockProvider.on(cut).leaseDuration(SHORT_LEASE)
        .extendEvery(Duration.ofMillis(200))
        .onLost((l, cause) -> { lostLocks.add(l); causes.add(cause); }).build();
    providers.add(a);
    String name = uniqueName("lost-local");
    Lock lock = a.tryAcquire(name).orElseThrow();

    cut.cutOffRenewals();

    await().atMost(Duration.ofSeconds(10)).until(() -> !causes.isEmpty());
    assertThat(lock.isHeld()).isFalse();
    assertThat(lostLocks).containsExactly(lock);
    assertThat(causes.get(0)).isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("not renewed before it ran out");
  }

  @Test
  void anOutageShorterThanTheLeaseCostsNoLock() {
    CutOffLeaseStore cut = new CutOffLeaseStore(createLeaseStore());
    List<SluiceException> causes = new CopyOnWriteArrayList<>();
    LockProvider a = LockProvider.on(cut).leaseDuration(LEASE).extendEvery(EXTEND)
        .onLost((l, cause) -> causes.add(cause)).build();
    providers.add(a);
    String name = uniqueName("outage");
    Lock lock = a.tryAcquire(name).orElseThrow();

    cut.cutOffRenewals();
    await().atMost(LEASE).until(() -> cut.refusedRenewals() >= 2);
    cut.restore();
    int before = cut.renewals();
    await().atMost(LEASE).until(() -> cut.renewals() > before);

    assertThat(causes).isEmpty();
    assertThat(lock.isHeld()).isTrue();
    assertThat(provider().tryAcquire(name)).isEmpty();
  }

  @Test
  void aHolderWhoseExtensionFindsATakeoverIsToldAndFenced() {
    CutOffLeaseStore cut = new CutOffLeaseStore(createLeaseStore());
    // The holder's time stands still: it believes its lease is valid, as a process whose clock
    // runs slow would. Only the store can tell it that it lost the lock.
    long frozenAt = System.nanoTime();
    Ticker frozen = () -> frozenAt;
    List<SluiceException> causes = new CopyOnWriteArrayList<>();
    LockProvider a = LockProvider.on(cut).leaseDuration(SHORT_LEASE)
        .extendEvery(Duration.ofMillis(200)).ticker(frozen)
        .onLost((l, cause) -> causes.add(cause)).build();
    providers.add(a);
    LockProvider b = provider();
    String name = uniqueName("lost-store");
    Lock stale = a.tryAcquire(name).orElseThrow();

    cut.cutOffRenewals();
    Lock current = b.acquire(name, Duration.ofSeconds(20));
    assertThat(stale.isHeld()).as("the stale holder cannot know yet").isTrue();
    cut.restore();

    await().atMost(Duration.ofSeconds(10)).until(() -> !causes.isEmpty());
    assertThat(causes).hasSize(1);
    assertThat(causes.get(0)).isInstanceOf(LeaseLostException.class);
    assertThat(stale.isHeld()).isFalse();
    assertThat(current.token()).isGreaterThan(stale.token());
    assertThat(current.isHeld()).isTrue();
  }

  // ------------------------------------------------------------------ clock skew

  @Test
  void processClocksAnHourAheadOrBehindChangeNothing() {
    // The lock reads no wall clock (expiry is the store's business); its own elapsed-time source
    // may have any origin, so two processes whose time sources differ by an hour behave the same.
    long hour = Duration.ofHours(1).toNanos();
    Ticker ahead = () -> System.nanoTime() + hour;
    Ticker behind = () -> System.nanoTime() - hour;
    LockProvider fast = provider(createLeaseStore(), SHORT_LEASE, Duration.ofMillis(200), ahead);
    LockProvider slow = provider(createLeaseStore(), SHORT_LEASE, Duration.ofMillis(200), behind);
    String name = uniqueName("skew");

    Lock held = slow.tryAcquire(name).orElseThrow();
    // The fast process must not think the slow one's lock expired an hour ago, and the slow one
    // must keep extending it (not lose it, not keep it past its lease without extending).
    assertKeptFor(2, held, fast, name);
    held.close();

    Lock fastLock = fast.tryAcquire(name).orElseThrow();
    assertThat(fastLock.token()).isGreaterThan(held.token());
    assertThat(slow.tryAcquire(name)).isEmpty();
    assertKeptFor(2, fastLock, slow, name);
  }

  /**
   * That {@code lock} stays held and {@code other} cannot take {@code name} for {@code leases} short lease
   * durations on end (it must be extended meanwhile), waiting at most two lease durations more for that to start.
   */
  private static void assertKeptFor(int leases, Lock lock, LockProvider other, String name) {
    await().during(SHORT_LEASE.multipliedBy(leases)).atMost(SHORT_LEASE.multipliedBy(leases + 2))
        .pollInterval(Duration.ofMillis(100))
        .until(() -> lock.isHeld() && other.tryAcquire(name).isEmpty());
  }

  // ------------------------------------------------------------------ timed locks

  @Test
  void aTimedLockIsNotExtendedAndExpiresAtItsAtMostForWhileItsHolderStillRuns() {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("timed");
    TimedLock lock = a.tryAcquireFor(name, Duration.ofMillis(300), Duration.ZERO).orElseThrow();
    assertThat(b.tryAcquire(name)).as("taken while within atMostFor").isEmpty();

    // Nothing extends it: the other provider gets it soon after 300 ms, though `lock` is open.
    Lock next = await().atMost(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(20))
        .until(() -> b.tryAcquire(name).orElse(null), java.util.Objects::nonNull);
    assertThat(next.token()).isGreaterThan(lock.token());
    assertThat(lock.isHeld()).isFalse();
    assertThat(lock.extend(Duration.ofSeconds(10), Duration.ZERO))
        .as("an expired lock that someone else took cannot be extended").isFalse();
    lock.close(); // harmless: never releases the new holder's lock
    assertThat(next.isHeld()).isTrue();
    assertThat(a.tryAcquire(name)).isEmpty();
  }

  @Test
  void aReleaseKeepsATimedLockTakenUntilAtLeastForHasPassedOnTheStoresClock() {
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("atleast");
    long before = System.nanoTime();
    TimedLock lock = a.tryAcquireFor(name, Duration.ofSeconds(30), Duration.ofMillis(700))
        .orElseThrow();
    lock.close();
    assertThat(lock.isHeld()).isFalse();
    assertThat(a.tryAcquire(name)).as("not even for its own provider").isEmpty();

    Lock next = await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(20))
        .until(() -> b.tryAcquire(name).orElse(null), java.util.Objects::nonNull);
    assertThat(Duration.ofNanos(System.nanoTime() - before))
        .as("the store granted it after the call began, and kept it atLeastFor from there")
        .isGreaterThanOrEqualTo(Duration.ofMillis(700));
    assertThat(next.token()).isGreaterThan(lock.token());

    // Without atLeastFor, or once it has passed, a release frees the lock at once.
    next.close();
    TimedLock quick = a.tryAcquireFor(name, Duration.ofSeconds(30), Duration.ZERO).orElseThrow();
    quick.close();
    assertThat(b.tryAcquire(name)).isPresent();
  }

  @Test
  void extendingATimedLockMovesItsExpiryOnTheStoresClockAndKeepsTheToken() {
    LeaseStore store = createLeaseStore();
    LockProvider a = provider(store, LEASE, EXTEND, Ticker.system());
    LockProvider b = provider();
    String name = uniqueName("extend");
    TimedLock lock = a.tryAcquireFor(name, Duration.ofMillis(500), Duration.ZERO).orElseThrow();
    assertThat(lock.extend(Duration.ofSeconds(20), Duration.ZERO)).isTrue();
    LeaseRecord record = store.read("lock:" + name).orElseThrow();
    assertThat(Duration.between(record.storeTime(), record.expiresAt()))
        .isGreaterThan(Duration.ofSeconds(15));
    assertThat(record.epoch()).isEqualTo(lock.token());
    assertThat(lock.isHeld()).isTrue();

    // A later extension that asks for atLeastFor keeps it taken after the release.
    assertThat(lock.extend(Duration.ofSeconds(20), Duration.ofSeconds(15))).isTrue();
    lock.close();
    assertThat(b.tryAcquire(name)).isEmpty();
    assertThatThrownBy(() -> lock.extend(Duration.ofSeconds(1), Duration.ZERO))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining(name)
        .hasMessageContaining("released");
  }

  @Test
  void aTimedLockThatRanOutCannotBeExtendedAndIsFreeForOthers() {
    LeaseStore store = createLeaseStore();
    LockProvider a = provider();
    LockProvider b = provider();
    String name = uniqueName("ranout");
    TimedLock lock = a.tryAcquireFor(name, Duration.ofMillis(1), Duration.ZERO).orElseThrow();
    await().atMost(Duration.ofSeconds(2)).until(() -> !lock.isHeld());
    assertThat(lock.extend(Duration.ofSeconds(10), Duration.ZERO)).isFalse();
    await().atMost(Duration.ofSeconds(2))
        .until(() -> store.read("lock:" + name).map(r -> !r.isHeld()).orElse(false));
    try (Lock next = b.tryAcquire(name).orElseThrow()) {
      assertThat(next.token()).isGreaterThan(lock.token());
    }
  }

  @Test
  void aLeaseGrantThatArrivesAfterItRanOutIsNotALockAndIsGivenBackAtOnce() {
    // Each grant reaches the holder, on its own ticker, later than the term it asked for: a store
    // that took that long to answer, or a pause between the answer and its use.
    AtomicLong lateBy = new AtomicLong();
    CutOffLeaseStore slow = new CutOffLeaseStore(createLeaseStore());
    slow.afterEachGrant(() -> lateBy.addAndGet(LEASE.toNanos() + 1_000_000));
    LockProvider late = provider(slow, LEASE, EXTEND, () -> System.nanoTime() + lateBy.get());
    LockProvider b = provider();
    String name = uniqueName("late");

    assertThat(late.tryAcquire(name)).as("a lock already run out is no lock").isEmpty();
    assertThat(lateBy.get()).as("the store did grant it").isEqualTo(LEASE.toNanos() + 1_000_000);
    // Given back: free now, not at its expiry.
    try (Lock next = b.tryAcquire(name).orElseThrow()) {
      assertThat(next.isHeld()).isTrue();
    }
  }

  @Test
  void aTimedGrantThatArrivesAfterItsTermIsReturnedAlreadyRunOut() {
    // ShedLock's semantics (its provider suite takes 2 ms locks): the lock is returned, but it is
    // not held and cannot be extended, so a task gets no token to write with.
    AtomicLong lateBy = new AtomicLong();
    CutOffLeaseStore slow = new CutOffLeaseStore(createLeaseStore());
    slow.afterEachGrant(() -> lateBy.addAndGet(Duration.ofMillis(501).toNanos()));
    LockProvider late = provider(slow, LEASE, EXTEND, () -> System.nanoTime() + lateBy.get());
    TimedLock lock = late.tryAcquireFor(uniqueName("late-timed"), Duration.ofMillis(500),
        Duration.ZERO).orElseThrow();
    assertThat(lock.isHeld()).isFalse();
    assertThat(lock.extend(Duration.ofSeconds(10), Duration.ZERO)).isFalse();
  }

  @Test
  void anExtensionTheStoreRefusesAfterATakeoverReturnsFalse() {
    LeaseStore store = createLeaseStore();
    // A ticker that stands still: on its own reckoning this holder never runs out, so only the
    // store's answer can tell it that the lock was taken over.
    long frozenAt = System.nanoTime();
    LockProvider paused = provider(store, LEASE, EXTEND, () -> frozenAt);
    LockProvider b = provider();
    String name = uniqueName("takeover");
    TimedLock lock = paused.tryAcquireFor(name, Duration.ofMillis(100), Duration.ZERO)
        .orElseThrow();
    Lock next = await().atMost(Duration.ofSeconds(5)).pollInterval(Duration.ofMillis(20))
        .until(() -> b.tryAcquire(name).orElse(null), java.util.Objects::nonNull);
    assertThat(lock.isHeld()).as("its own reckoning").isTrue();
    assertThat(lock.extend(Duration.ofSeconds(10), Duration.ZERO)).isFalse();
    assertThat(lock.isHeld()).isFalse();
    assertThat(store.read("lock:" + name).orElseThrow().epoch()).isEqualTo(next.token());
  }

  @Test
  void timedLockTermsAreValidatedNamingTheParameter() {
    LockProvider p = provider();
    String name = uniqueName("terms");
    assertThatThrownBy(() -> p.tryAcquireFor(name, Duration.ZERO, Duration.ZERO))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("atMostFor")
        .hasMessageContaining("at least 1 ms");
    assertThatThrownBy(() -> p.tryAcquireFor(name, Duration.ofSeconds(1), Duration.ofSeconds(2)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("atLeastFor")
        .hasMessageContaining("above atMostFor");
    assertThatThrownBy(() -> p.tryAcquireFor(name, Duration.ofSeconds(1), Duration.ofMillis(-1)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("atLeastFor");
    assertThatThrownBy(() -> p.tryAcquireFor(name, null, Duration.ZERO))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("atMostFor");
    TimedLock lock = p.tryAcquireFor(name, Duration.ofSeconds(5), Duration.ZERO).orElseThrow();
    assertThatThrownBy(() -> lock.extend(Duration.ofSeconds(1), Duration.ofSeconds(3)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("atLeastFor");
    assertThat(lock.isHeld()).as("a refused extension changes nothing").isTrue();
    lock.close();
  }

  @Test
  void closingTheProviderReleasesItsTimedLocksHonouringAtLeastFor() {
    LockProvider a = provider();
    LockProvider b = provider();
    String free = uniqueName("free");
    String kept = uniqueName("kept");
    a.tryAcquireFor(free, Duration.ofSeconds(30), Duration.ZERO).orElseThrow();
    a.tryAcquireFor(kept, Duration.ofSeconds(30), Duration.ofSeconds(20)).orElseThrow();
    a.close();
    assertThat(b.tryAcquire(free)).as("released at once").isPresent();
    assertThat(b.tryAcquire(kept)).as("kept until atLeastFor").isEmpty();
    assertThatThrownBy(() -> a.tryAcquireFor(uniqueName("closed"), Duration.ofSeconds(1),
        Duration.ZERO)).isInstanceOf(SluiceException.class).hasMessageContaining("closed");
  }

  // ------------------------------------------------------------------ configuration

  @Test
  void badConfigurationIsRejectedNamingTheParameter() {
    LeaseStore store = createLeaseStore();
    assertThatThrownBy(() -> LockProvider.on(store).leaseDuration(Duration.ofSeconds(10))
        .extendEvery(Duration.ofSeconds(5)).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("extendEvery")
        .hasMessageContaining("a third of leaseDuration");
    assertThatThrownBy(() -> LockProvider.on(store).leaseDuration(Duration.ofMillis(10)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("leaseDuration");
    assertThatThrownBy(() -> LockProvider.on(store).extendEvery(Duration.ZERO))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("extendEvery");
    assertThatThrownBy(() -> LockProvider.on(store)
        .backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("backoff.max");
    assertThatThrownBy(() -> LockProvider.on(store).ownerLabel("x".repeat(101)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("ownerLabel")
        .hasMessageContaining("1..100 characters");
    assertThatThrownBy(() -> LockProvider.on(store).ownerLabel("billing/eu"))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("ownerLabel")
        .hasMessageContaining("without '/'");
    assertThatThrownBy(() -> LockProvider.on(null))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("store");
    LockProvider p = provider();
    assertThatThrownBy(() -> p.tryAcquire(" "))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("name");
    assertThatThrownBy(() -> p.tryAcquire("x".repeat(300)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("name");
    assertThatThrownBy(() -> p.acquire("n", Duration.ofSeconds(-1)))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("maxWait");
    // The default extension interval (a third of the lease) is valid for any lease duration.
    LockProvider defaults = LockProvider.on(store).leaseDuration(Duration.ofMillis(100)).build();
    providers.add(defaults);
  }

  @Test
  void anExtensionIntervalAboveAThirdOfTheLeaseIsRejectedSayingWhy() {
    LeaseStore store = createLeaseStore();
    // 4 s of a 10 s lease: below half, accepted before, but two failed extensions lose the lock
    assertThatThrownBy(() -> LockProvider.on(store).leaseDuration(Duration.ofSeconds(10))
        .extendEvery(Duration.ofSeconds(4)).build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("extendEvery")
        .hasMessageContaining("PT4S")
        .hasMessageContaining("must be at most a third of leaseDuration PT10S")
        .hasMessageContaining("two extensions can fail in a row");
    LockProvider third = LockProvider.on(store).leaseDuration(Duration.ofSeconds(9))
        .extendEvery(Duration.ofSeconds(3)).build();
    providers.add(third);
    assertThat(third.tryAcquire(uniqueName("third"))).isPresent();
  }

  // ------------------------------------------------------------------ helpers

  /**
   * A real store whose renewals can be cut off, as a network partition between the holder and
   * the database would: every other call goes through. Not a fake of the database.
   */
  protected static final class CutOffLeaseStore implements LeaseStore {
    private final LeaseStore delegate;
    private volatile boolean cut;
    private final AtomicInteger refusedRenewals = new AtomicInteger();
    private final AtomicInteger renewals = new AtomicInteger();
    private volatile Runnable afterGrant = () -> {};

    public CutOffLeaseStore(LeaseStore delegate) {
      this.delegate = delegate;
    }

    public void cutOffRenewals() {
      cut = true;
    }

    public void restore() {
      cut = false;
    }

    /** Renewals refused while cut off. */
    public int refusedRenewals() {
      return refusedRenewals.get();
    }

    /** Renewals that reached the store and succeeded. */
    public int renewals() {
      return renewals.get();
    }

    /** Runs {@code hook} after each acquisition the store granted, before it is returned. */
    public void afterEachGrant(Runnable hook) {
      afterGrant = hook;
    }

    @Override
    public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
      Optional<Lease> granted = delegate.tryAcquire(name, owner, duration);
      if (granted.isPresent()) {
        afterGrant.run();
      }
      return granted;
    }

    @Override
    public Lease renew(Lease lease, Duration duration) {
      if (cut) {
        refusedRenewals.incrementAndGet();
        throw new LeaseStoreException("store unreachable (renewals cut off by the test)", true,
            null);
      }
      Lease renewed = delegate.renew(lease, duration);
      renewals.incrementAndGet();
      return renewed;
    }

    @Override
    public Lease commit(Lease lease, Position checkpoint) {
      return delegate.commit(lease, checkpoint);
    }

    @Override
    public boolean release(Lease lease) {
      return delegate.release(lease);
    }

    @Override
    public boolean delete(Lease lease) {
      return delegate.delete(lease);
    }

    @Override
    public boolean deleteIfIdle(String name, long epoch) {
      return delegate.deleteIfIdle(name, epoch);
    }

    @Override
    public Optional<LeaseRecord> read(String name) {
      return delegate.read(name);
    }

    @Override
    public List<LeaseRecord> list(String prefix) {
      return delegate.list(prefix);
    }

    @Override
    public Instant now() {
      return delegate.now();
    }
  }

}
