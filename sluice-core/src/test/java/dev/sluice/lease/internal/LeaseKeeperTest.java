package dev.sluice.lease.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.SluiceException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.lease.StubLeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The keeper's rules, on a controllable ticker; renewals are driven by the test, never by sleeping. */
class LeaseKeeperTest {
  private static final Duration LEASE = Duration.ofSeconds(10);
  private static final long MS = 1_000_000L;
  // margin = min(lease/20, 500 ms) = 500 ms: the local deadline is start + 9.5 s
  private static final long DEADLINE = 9_500 * MS;

  private final AtomicLong now = new AtomicLong(1_000 * MS);
  private final ScriptedStore store = new ScriptedStore();
  private final List<SluiceException> losses = new ArrayList<>();
  private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
  private final Lease granted =
      new Lease("orders#0", "owner-a", 7, Instant.parse("2026-01-01T00:00:10Z"), null);

  @AfterEach
  void stop() {
    scheduler.shutdownNow();
  }

  private LeaseKeeper keeper() {
    // renewEvery is long: the test calls renewOnce() itself, the scheduler never fires
    return new LeaseKeeper(store, granted, now.get(), LEASE, Duration.ofHours(1), scheduler,
        now::get, (lease, cause) -> losses.add(cause));
  }

  @Test
  void aSuccessfulRenewalMovesTheLocalDeadlineFromTheRequestStart() {
    LeaseKeeper keeper = keeper();
    now.addAndGet(5_000 * MS);
    long renewStart = now.get();
    store.onRenew = () -> {
      now.addAndGet(200 * MS); // the request takes 200 ms
      return granted.withExpiresAt(Instant.parse("2026-01-01T00:00:15Z"));
    };
    keeper.renewOnce();
    assertThat(keeper.lease().expiresAt()).isEqualTo(Instant.parse("2026-01-01T00:00:15Z"));

    now.set(renewStart + DEADLINE - 1);
    assertThat(keeper.isValid()).isTrue();
    now.set(renewStart + DEADLINE);
    assertThat(keeper.isValid()).isFalse();
    assertThat(keeper.lostReason()).contains("not renewed before it ran out");
    assertThat(losses).hasSize(1);
    assertThat(losses.get(0)).isInstanceOf(LeaseLostException.class);
  }

  @Test
  void withoutRenewalTheLeaseIsInvalidAtTheLocalDeadline() {
    LeaseKeeper keeper = keeper();
    now.addAndGet(DEADLINE - 1);
    assertThat(keeper.isValid()).isTrue();
    now.addAndGet(1);
    assertThat(keeper.isValid()).isFalse();
    assertThat(losses).hasSize(1);
  }

  @Test
  void aRenewalTheStoreAcceptsAfterTheLocalDeadlineIsALoss() {
    LeaseKeeper keeper = keeper();
    now.addAndGet(1_000 * MS);
    store.onRenew = () -> {
      now.addAndGet(20_000 * MS); // the process was paused while the request was in flight
      return granted;
    };
    keeper.renewOnce();
    assertThat(keeper.isValid()).isFalse();
    assertThat(keeper.lostReason()).contains("after the local deadline");
    assertThat(losses).hasSize(1);
  }

  @Test
  void aRenewalStartedAfterTheDeadlineIsNotSentAndIsALoss() {
    LeaseKeeper keeper = keeper();
    now.addAndGet(30_000 * MS);
    keeper.renewOnce();
    assertThat(store.renewCalls).isZero();
    assertThat(keeper.lostReason()).contains("not renewed before it ran out");
    assertThat(losses).hasSize(1);
  }

  @Test
  void aRenewalSentLateThatHasNotReturnedAtTheDeadlineSaysItWaitedForAThread() {
    LeaseKeeper keeper = new LeaseKeeper(store, granted, now.get(), LEASE, Duration.ofSeconds(1), scheduler,
        now::get, (lease, cause) -> losses.add(cause));
    now.addAndGet(4_000 * MS); // due after 1 s, sent after 4 s: the renewal threads were busy
    String[] seenWhileWaiting = new String[1];
    store.onRenew = () -> {
      now.addAndGet(DEADLINE); // no answer until after the deadline
      seenWhileWaiting[0] = keeper.isValid() ? null : keeper.lostReason();
      return granted;
    };
    keeper.renewOnce();
    assertThat(seenWhileWaiting[0]).contains("not renewed before it ran out")
        .contains("has not returned").contains("it was sent 3000 ms after it was due")
        .contains("every renewal thread was busy");
    assertThat(losses).hasSize(1);
  }

  @Test
  void aRenewalSentOnTimeThatHasNotReturnedAtTheDeadlineBlamesOnlyTheStoreOrAPause() {
    LeaseKeeper keeper = new LeaseKeeper(store, granted, now.get(), LEASE, Duration.ofSeconds(1), scheduler,
        now::get, (lease, cause) -> losses.add(cause));
    now.addAndGet(1_000 * MS);
    String[] seenWhileWaiting = new String[1];
    store.onRenew = () -> {
      now.addAndGet(DEADLINE);
      seenWhileWaiting[0] = keeper.isValid() ? null : keeper.lostReason();
      return granted;
    };
    keeper.renewOnce();
    assertThat(seenWhileWaiting[0]).contains("the renewal sent 9500 ms ago has not returned")
        .doesNotContain("renewal thread");
  }

  @Test
  void aRejectedRenewalIsALossWithTheStoresCause() {
    LeaseKeeper keeper = keeper();
    LeaseLostException rejected = new LeaseLostException("orders#0", 7, "held by owner-b/8");
    store.onRenew = () -> {
      throw rejected;
    };
    keeper.renewOnce();
    assertThat(keeper.isValid()).isFalse();
    assertThat(keeper.lostCause()).isSameAs(rejected);
    assertThat(losses).containsExactly(rejected);
  }

  @Test
  void aNonRetryableStoreErrorIsALossAtOnce() {
    LeaseKeeper keeper = keeper();
    LeaseStoreException denied = new LeaseStoreException("not authorized on sluice", false, null);
    store.onRenew = () -> {
      throw denied;
    };
    keeper.renewOnce();
    assertThat(keeper.isValid()).isFalse();
    assertThat(keeper.lostReason()).contains("retrying cannot help").contains("not authorized");
    assertThat(losses).containsExactly(denied);
  }

  @Test
  void retryableErrorsKeepTheLeaseUntilTheLocalDeadline() {
    LeaseKeeper keeper = keeper();
    LeaseStoreException unreachable = new LeaseStoreException("timed out", true, null);
    store.onRenew = () -> {
      throw unreachable;
    };
    now.addAndGet(3_000 * MS);
    keeper.renewOnce();
    now.addAndGet(3_000 * MS);
    keeper.renewOnce();
    assertThat(keeper.isValid()).isTrue();
    assertThat(losses).isEmpty();

    store.onRenew = () -> {
      now.addAndGet(DEADLINE); // the failing call itself outlasts the deadline
      throw unreachable;
    };
    keeper.renewOnce();
    assertThat(keeper.isValid()).isFalse();
    assertThat(keeper.lostReason()).contains("renewals failed until the local deadline");
    assertThat(losses).hasSize(1);
    assertThat(losses.get(0)).isInstanceOf(LeaseLostException.class).hasCause(unreachable);
    assertThat(store.renewCalls).isEqualTo(3);
  }

  @Test
  void anOutOfBandRenewalExtendsButNeverShortensTheDeadline() {
    LeaseKeeper keeper = keeper();
    long start = now.get();
    now.addAndGet(4_000 * MS);
    keeper.extended(granted, now.get());
    now.set(start + 4_000 * MS + DEADLINE - 1);
    assertThat(keeper.isValid()).isTrue();

    keeper.extended(granted, start); // an older request start must not pull the deadline back
    assertThat(keeper.isValid()).isTrue();
  }

  @Test
  void aCheckpointKeepsTheDeadlineAndRecordsThePosition() {
    LeaseKeeper keeper = keeper();
    Position position = Position.of("p-42");
    Lease committed = granted.withCheckpoint(position).withExpiresAt(Instant.parse("2030-01-01T00:00:00Z"));
    keeper.checkpointed(committed);
    assertThat(keeper.lease().checkpoint()).isEqualTo(position);
    assertThat(keeper.lease().expiresAt()).isEqualTo(granted.expiresAt());
    now.addAndGet(DEADLINE);
    assertThat(keeper.isValid()).isFalse();
  }

  @Test
  void releaseStopsRenewingAndReleasesAValidLease() {
    LeaseKeeper keeper = keeper();
    keeper.start();
    assertThat(keeper.release()).isTrue();
    assertThat(store.released).containsExactly(granted);
    keeper.renewOnce();
    assertThat(store.renewCalls).isZero();
    assertThat(losses).isEmpty();
  }

  @Test
  void releaseOfALostLeaseDoesNotTouchTheStore() {
    LeaseKeeper keeper = keeper();
    keeper.markLost("taken over");
    assertThat(keeper.release()).isFalse();
    assertThat(store.released).isEmpty();
    assertThat(losses).hasSize(1);
  }

  @Test
  void retireStopsRenewingWithoutReleasingAndReportsAnEarlierLoss() {
    LeaseKeeper keeper = keeper();
    assertThat(keeper.retire()).isNull();
    keeper.renewOnce();
    keeper.markLost("a late renewal failure");
    assertThat(store.renewCalls).isZero();
    assertThat(store.released).isEmpty();
    assertThat(losses).isEmpty();

    LeaseKeeper other = keeper();
    other.markLost("taken over");
    assertThat(other.retire()).isEqualTo("taken over");
  }

  @Test
  void aLossIsReportedOnce() {
    LeaseKeeper keeper = keeper();
    keeper.markLost("first");
    keeper.markLost("second");
    now.addAndGet(DEADLINE);
    assertThat(keeper.isValid()).isFalse();
    assertThat(keeper.lostReason()).isEqualTo("first");
    assertThat(losses).hasSize(1);
  }

  /** A store whose renewals the test scripts; records releases. */
  private static final class ScriptedStore extends StubLeaseStore {
    Supplier<Lease> onRenew = () -> {
      throw new AssertionError("unexpected renewal");
    };
    int renewCalls;
    final List<Lease> released = new ArrayList<>();

    @Override
    public Lease renew(Lease lease, Duration duration) {
      renewCalls++;
      return onRenew.get();
    }

    @Override
    public boolean release(Lease lease) {
      released.add(lease);
      return true;
    }

    @Override
    public Optional<LeaseRecord> read(String name) {
      return Optional.empty();
    }

    @Override
    public List<LeaseRecord> list(String prefix) {
      return List.of();
    }

    @Override
    public Instant now() {
      return Instant.EPOCH;
    }
  }
}
