package dev.sluice.lease.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.SluiceException;
import dev.sluice.Ticker;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.StubLeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Issue 34 item 2.1, in the keeper: the loss is reported at the local deadline even while a
 * renewal waits on a store that does not answer (a blackholed connection), not when the renewal
 * returns or someone next asks {@code isValid()} (docs/adr/0100-loss-at-the-local-deadline.md).
 * Real threads and the system ticker: the watchdog runs in real time.
 */
class LeaseKeeperDeadlineTest {
  private static final Duration LEASE = Duration.ofSeconds(1);

  private final ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
  private final CountDownLatch answer = new CountDownLatch(1);
  private final Lease granted =
      new Lease("orders#0", "owner-a", 7, Instant.parse("2026-01-01T00:00:01Z"), null);

  @AfterEach
  void stop() {
    answer.countDown();
    scheduler.shutdownNow();
  }

  /** A loss as the listener saw it: when (ticker), on which thread, with what. */
  private record Loss(long atNanos, String thread, SluiceException cause) {}

  @Test
  void theLossIsReportedAtTheLocalDeadlineWhileARenewalIsStuckOnTheStore() throws Exception {
    AtomicBoolean renewing = new AtomicBoolean();
    AtomicInteger renewals = new AtomicInteger();
    StubLeaseStore silent = new StubLeaseStore() {
      @Override
      public Lease renew(Lease lease, Duration duration) {
        renewals.incrementAndGet();
        renewing.set(true);
        try {
          answer.await(); // a socket nobody answers
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        } finally {
          renewing.set(false);
        }
        return lease; // the store accepts, long after the deadline
      }
    };
    List<Loss> losses = new CopyOnWriteArrayList<>();
    Ticker ticker = Ticker.system();
    LeaseKeeper keeper = new LeaseKeeper(silent, granted, ticker.nanos(), LEASE,
        Duration.ofMillis(300), scheduler, ticker,
        (lease, cause) -> losses.add(new Loss(ticker.nanos(), Thread.currentThread().getName(), cause)));
    keeper.start();

    await().atMost(Duration.ofSeconds(5)).until(() -> !losses.isEmpty());

    assertThat(renewing).as("the renewal is still waiting for the store").isTrue();
    assertThat(renewals).hasValue(1);
    Loss loss = losses.get(0);
    assertThat(loss.atNanos() - keeper.deadlineNanos())
        .as("reported at the local deadline, never before it").isGreaterThanOrEqualTo(0);
    assertThat(loss.thread()).isEqualTo("sluice-lease-lost");
    assertThat(loss.cause()).isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("not renewed before it ran out");
    assertThat(keeper.isValid()).isFalse();

    // The store answers at last: the late renewal changes nothing and is not reported again.
    answer.countDown();
    await().atMost(Duration.ofSeconds(5)).until(() -> !renewing.get());
    scheduler.shutdown();
    assertThat(scheduler.awaitTermination(5, TimeUnit.SECONDS)).isTrue();
    assertThat(keeper.isValid()).isFalse();
    assertThat(losses).hasSize(1);
  }

  @Test
  void renewalsThatGetThroughMoveTheWatchdogWithTheDeadline() {
    AtomicBoolean answering = new AtomicBoolean(true);
    StubLeaseStore store = new StubLeaseStore() {
      @Override
      public Lease renew(Lease lease, Duration duration) {
        if (!answering.get()) {
          throw new dev.sluice.lease.LeaseStoreException("store unreachable", true, null);
        }
        return lease;
      }
    };
    List<Loss> losses = new CopyOnWriteArrayList<>();
    Ticker ticker = Ticker.system();
    LeaseKeeper keeper = new LeaseKeeper(store, granted, ticker.nanos(), LEASE,
        Duration.ofMillis(200), scheduler, ticker,
        (lease, cause) -> losses.add(new Loss(ticker.nanos(), Thread.currentThread().getName(), cause)));
    keeper.start();

    // Three leases long: the first watch fires at the first deadline, finds it moved, watches on.
    await().during(Duration.ofMillis(3 * LEASE.toMillis())).atMost(Duration.ofSeconds(10))
        .until(() -> losses.isEmpty() && keeper.isValid());

    answering.set(false);
    await().atMost(Duration.ofSeconds(5)).until(() -> !losses.isEmpty());
    assertThat(losses.get(0).atNanos() - keeper.deadlineNanos()).isGreaterThanOrEqualTo(0);
    assertThat(losses).hasSize(1);
  }

  /**
   * Two leases renewed by one thread: the first lease's renewal waits on a store that does not
   * answer, so the second's never starts. Each loss says which it was: a renewal without an answer,
   * or one that waited for a renewal thread (a process renewing more leases than its threads can at
   * the store's round trip: RenewalCapacityBenchmark), not "store unreachable" for both.
   */
  @Test
  void aLeaseWhoseRenewalNeverGotAThreadSaysSoAndNotThatTheStoreDidNotAnswer() {
    Lease other = new Lease("orders#1", "owner-a", 3, Instant.parse("2026-01-01T00:00:01Z"), null);
    StubLeaseStore stuckOnTheFirst = new StubLeaseStore() {
      @Override
      public Lease renew(Lease lease, Duration duration) {
        if (lease.name().equals(granted.name())) {
          try {
            answer.await(); // a socket nobody answers, on the one renewal thread
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
        return lease;
      }
    };
    Map<String, SluiceException> losses = new ConcurrentHashMap<>();
    Ticker ticker = Ticker.system();
    LeaseKeeper first = new LeaseKeeper(stuckOnTheFirst, granted, ticker.nanos(), LEASE,
        Duration.ofMillis(100), scheduler, ticker, (lease, cause) -> losses.put(lease.name(), cause));
    LeaseKeeper second = new LeaseKeeper(stuckOnTheFirst, other, ticker.nanos(), LEASE,
        Duration.ofMillis(300), scheduler, ticker, (lease, cause) -> losses.put(lease.name(), cause));
    first.start();
    second.start();

    await().atMost(Duration.ofSeconds(5)).until(() -> losses.size() == 2);

    assertThat(losses.get(granted.name())).hasMessageContaining("not renewed before it ran out")
        .hasMessageContaining("the renewal sent").hasMessageContaining("has not returned");
    assertThat(losses.get(other.name())).hasMessageContaining("not renewed before it ran out")
        .hasMessageContaining("had not started: every renewal thread was busy");
    assertThat(first.isValid()).isFalse();
    assertThat(second.isValid()).isFalse();
  }
}
