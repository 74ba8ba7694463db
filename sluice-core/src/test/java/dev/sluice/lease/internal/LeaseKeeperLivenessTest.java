package dev.sluice.lease.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.SluiceException;
import dev.sluice.Ticker;
import dev.sluice.lease.HolderLiveness;
import dev.sluice.lease.Lease;
import dev.sluice.lease.StubLeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The keeper's side of a store's liveness condition (LeaseStore#liveness, ADR 0114): while the
 * condition lasts, nothing changes (renewals, deadline); the moment it ends, the holder is no
 * longer valid and the loss is reported from the watchdog with the store's reason, long before the
 * lease's own deadline. A store without one (null) is the keeper of ADR 0100 unchanged.
 */
class LeaseKeeperLivenessTest {
  private static final Duration LEASE = Duration.ofSeconds(30);

  private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
  private final Lease granted =
      new Lease("orders#0", "owner-a", 7, Instant.parse("2026-01-01T00:00:30Z"), null);

  @AfterEach
  void stop() {
    scheduler.shutdownNow();
  }

  /** A condition that lasts until {@code until} on the system ticker, which the test moves. */
  private static final class Until implements HolderLiveness {
    final AtomicLong until = new AtomicLong();

    @Override
    public long remainingNanos() {
      return until.get() - System.nanoTime();
    }

    @Override
    public String lostReason() {
      return "its database session ended";
    }
  }

  @Test
  void theHolderStopsWhenTheConditionEndsEvenThoughItsLeaseHasLongToRun() {
    Until condition = new Until();
    condition.until.set(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300));
    StubLeaseStore store = new StubLeaseStore() {
      @Override
      public HolderLiveness liveness(Lease lease) {
        return lease.epoch() == 7 ? condition : null;
      }
    };
    List<SluiceException> losses = new CopyOnWriteArrayList<>();
    LeaseKeeper keeper = new LeaseKeeper(store, granted, System.nanoTime(), LEASE,
        LEASE.dividedBy(3), scheduler, Ticker.system(), (lease, cause) -> losses.add(cause));
    keeper.start();
    assertThat(keeper.isValid()).isTrue();
    // Confirmed again and again (as a store's liveness thread does): the watchdog follows it.
    for (int i = 0; i < 5; i++) {
      condition.until.set(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300));
      assertThat(keeper.isValid()).isTrue();
    }

    condition.until.set(System.nanoTime()); // not confirmed any more

    assertThat(keeper.isValid()).as("no longer valid the moment the condition ended").isFalse();
    await().atMost(Duration.ofSeconds(5)).until(() -> !losses.isEmpty());
    assertThat(losses).hasSize(1);
    assertThat(losses.get(0).getMessage()).contains("its database session ended");
    assertThat(keeper.lostReason()).isEqualTo("its database session ended");
    assertThat(System.nanoTime() - keeper.deadlineNanos()).as("long before the lease's deadline").isNegative();
  }

  @Test
  void theWatchdogReportsTheEndWithoutAnyoneAsking() {
    Until condition = new Until();
    condition.until.set(System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200));
    StubLeaseStore store = new StubLeaseStore() {
      @Override
      public HolderLiveness liveness(Lease lease) {
        return condition;
      }
    };
    List<String> threads = new CopyOnWriteArrayList<>();
    LeaseKeeper keeper = new LeaseKeeper(store, granted, System.nanoTime(), LEASE,
        LEASE.dividedBy(3), scheduler, Ticker.system(),
        (lease, cause) -> threads.add(Thread.currentThread().getName()));
    keeper.start();

    await().atMost(Duration.ofSeconds(5)).until(() -> !threads.isEmpty());

    assertThat(threads).containsExactly("sluice-lease-lost");
    assertThat(keeper.lostReason()).isEqualTo("its database session ended");
  }
}
