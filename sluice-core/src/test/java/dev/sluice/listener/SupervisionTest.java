package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStoreException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * No partition dies silently, a lost lease or a close never waits for a read in flight, errors
 * that retrying cannot fix stop the partition naming the cause, and configurations that cannot
 * keep the guarantees are refused. Each test fails on the engine before this change.
 */
class SupervisionTest {
  private static final String LEASE = "sup/orders#0of1";

  private final InMemoryLeaseStore memory = new InMemoryLeaseStore(Clock.systemUTC());
  private final FaultyLeaseStore store = new FaultyLeaseStore(memory);
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  private final List<Listener<String>> listeners = new ArrayList<>();
  private final List<CountDownLatch> blocked = new ArrayList<>();

  @AfterEach
  void closeAll() {
    blocked.forEach(CountDownLatch::countDown);
    listeners.forEach(Listener::close);
  }

  private Listener.Builder<String> builder(Handler<String> handler) {
    return EngineTimings.fast(Listener.builder(feed, store).group("sup").handler(handler))
        .checkpoint(CheckpointPolicy.everyChange())
        .onFailure(FailurePolicy.block(RetryPolicy.attempts(3, Duration.ofMillis(10),
            Duration.ofMillis(50))));
  }

  private Listener<String> start(Listener.Builder<String> b) {
    Listener<String> l = b.build();
    listeners.add(l);
    return l.start();
  }

  private void write(int n) {
    for (int i = 0; i < n; i++) {
      feed.append("k" + (i % 5), "v" + i);
    }
  }

  private String checkpoint() {
    return memory.read(LEASE).map(LeaseRecord::checkpoint).map(p -> p.token()).orElse(null);
  }

  private static PartitionStatus status(Listener<String> l) {
    return l.status().get(0);
  }

  @Test
  void aHandlerThatThrowsAnErrorOnceIsRetriedAndThePartitionGoesOn() {
    write(20);
    List<String> seen = new CopyOnWriteArrayList<>();
    AtomicInteger calls = new AtomicInteger();
    Listener<String> l = start(builder((e, f) -> {
      if (calls.incrementAndGet() == 5) {
        throw new AssertionError("a bug in the handler, once");
      }
      seen.add(e.document());
    }));
    await().atMost(Duration.ofSeconds(10)).until(() -> "20".equals(checkpoint()));
    assertThat(seen).hasSize(20).doesNotHaveDuplicates();
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void aHandlerThatLeavesTheInterruptFlagSetDoesNotStopThePartition() {
    write(10);
    Listener<String> l = start(builder((e, f) -> {
      if (e.document().equals("v2")) {
        Thread.currentThread().interrupt();
      }
    }).checkpoint(CheckpointPolicy.every(3, Duration.ofMillis(50))));
    await().atMost(Duration.ofSeconds(10)).until(() -> "10".equals(checkpoint()));
    write(5);
    await().atMost(Duration.ofSeconds(10)).until(() -> "15".equals(checkpoint()));
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void anObserverThatThrowsFromAcquiredDoesNotLeaveALeaseRenewedWithNobodyBehindIt() {
    write(10);
    Listener<String> l = start(builder((e, f) -> {}).observer(new ListenerObserver() {
      @Override
      public void acquired(Lease lease) {
        throw new NoClassDefFoundError("metrics library missing");
      }
    }));
    await().atMost(Duration.ofSeconds(10)).until(() -> "10".equals(checkpoint()));
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void anErrorEscapingTheFeedRestartsThePartitionAndIsShownInTheStatus() {
    write(5);
    Listener<String> l = start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "5".equals(checkpoint()));
    feed.errorNextPolls(1);
    await().atMost(Duration.ofSeconds(10)).until(() -> status(l).restarts() == 1);
    assertThat(status(l).error()).contains("StackOverflowError");
    write(5);
    await().atMost(Duration.ofSeconds(10)).until(() -> "10".equals(checkpoint()));
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void skipToLatestSurvivesATransientErrorWhileReopening() {
    write(3);
    Listener<String> first = start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    first.close();
    write(7);
    feed.trimBefore(9); // the checkpoint (3) fell off the history
    feed.failNextLatestOpens(2);
    Listener<String> l = start(builder((e, f) -> {}).onHistoryLost(HistoryLostPolicy.SKIP_TO_LATEST));
    await().atMost(Duration.ofSeconds(10)).until(() -> "10".equals(checkpoint()));
    assertThat(status(l).error()).contains("skipped to latest");
    write(3);
    await().atMost(Duration.ofSeconds(10)).until(() -> "13".equals(checkpoint()));
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void aBlockedPartitionShowsBlockedWithItsError() {
    write(3);
    AtomicInteger failuresLeft = new AtomicInteger(8);
    Listener<String> l = start(builder((e, f) -> {
      if (e.document().equals("v1") && failuresLeft.getAndDecrement() > 0) {
        throw new IllegalStateException("downstream refuses v1");
      }
    }));
    await().atMost(Duration.ofSeconds(10)).until(() -> status(l).state() == PartitionState.BLOCKED);
    assertThat(status(l).error()).contains("downstream refuses v1").contains("blocked");
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void theStatusNamesTheErrorFromTheMomentThePartitionShowsBlocked() {
    // A health check reads the state and the error apart: the error must be there first.
    write(3);
    List<PartitionStatus> atBlocked = new CopyOnWriteArrayList<>();
    CountDownLatch sawBlocked = new CountDownLatch(1);
    start(builder((e, f) -> {
      if (e.document().equals("v1") && sawBlocked.getCount() > 0) {
        throw new IllegalStateException("downstream refuses v1");
      }
    }).observer(new ListenerObserver() {
      @Override
      public void stateChanged(String lease, PartitionState from, PartitionState to) {
        if (to == PartitionState.BLOCKED) {
          atBlocked.add(status(listeners.get(0)));
          sawBlocked.countDown();
        }
      }
    }));
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    assertThat(atBlocked).hasSize(1);
    assertThat(atBlocked.get(0).error()).contains("blocked on change").contains("downstream refuses v1");
  }

  @Test
  void aHandlerRetryShowsRetryingWithTheChangesAttemptsThenBlocked() {
    write(3);
    java.util.concurrent.CountDownLatch secondFailure = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
    AtomicInteger attempts = new AtomicInteger();
    java.util.List<PartitionStatus> whileRetrying = new java.util.concurrent.CopyOnWriteArrayList<>();
    Listener<String> l = start(builder((e, f) -> {
      if (!e.document().equals("v1")) {
        return;
      }
      int n = attempts.incrementAndGet();
      if (n == 2) {
        secondFailure.countDown();
      }
      if (n == 3) {
        // The third attempt: the status the second failure left, seen from inside the handler.
        whileRetrying.add(status(listeners.get(0)));
      }
      if (n <= 4) {
        throw new IllegalStateException("the target refuses v1 (attempt " + n + ")");
      }
      try {
        release.await();
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
      }
    }));
    await().atMost(Duration.ofSeconds(10)).until(() -> !whileRetrying.isEmpty());
    PartitionStatus retrying = whileRetrying.get(0);
    assertThat(retrying.state()).isEqualTo(PartitionState.RETRYING);
    assertThat(retrying.error()).contains("the target refuses v1 (attempt 2)").contains("attempt 2 of 3");
    assertThat(retrying.attempts()).isEqualTo(2);
    assertThat(retrying.nextAttemptAt()).isNotNull();
    // Attempts used up: BLOCKED, still counting the change's attempts, until it succeeds.
    await().atMost(Duration.ofSeconds(10)).until(() -> attempts.get() == 5);
    PartitionStatus blocked = status(l);
    assertThat(blocked.state()).isEqualTo(PartitionState.BLOCKED);
    assertThat(blocked.attempts()).isEqualTo(4);
    assertThat(blocked.error()).contains("blocked").contains("attempt 4");
    release.countDown();
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    PartitionStatus after = status(l);
    assertThat(after.state()).isEqualTo(PartitionState.ACTIVE);
    assertThat(after.attempts()).isZero();
    assertThat(after.nextAttemptAt()).isNull();
    assertThat(secondFailure.getCount()).isZero();
  }

  @Test
  void aCommitTheStoreRejectsForGoodFailsThePartitionNamingTheCause() {
    write(3);
    store.failCommits(new LeaseStoreException("not authorized on shop to execute command update",
        false, null), Integer.MAX_VALUE);
    Listener<String> l = start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> status(l).state() == PartitionState.FAILED);
    assertThat(status(l).error()).contains("rejects the checkpoint commit")
        .contains("not authorized");
    await().atMost(Duration.ofSeconds(10))
        .until(() -> !memory.read(LEASE).orElseThrow().isHeld());
  }

  @Test
  void aTransientCommitErrorIsRetried() {
    write(3);
    store.failCommits(new LeaseStoreException("connection reset", true, null), 3);
    Listener<String> l = start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    assertThat(status(l).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void aLostLeaseIsNoticedWhileAReadIsInFlight() {
    write(2);
    Listener<String> l = start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "2".equals(checkpoint()));
    CountDownLatch release = new CountDownLatch(1);
    blocked.add(release);
    feed.blockNextPoll(release);
    memory.steal(LEASE, "thief");
    await().atMost(Duration.ofSeconds(5)).until(() -> status(l).state() == PartitionState.LOST);
    assertThat(release.getCount()).as("the read is still in flight").isEqualTo(1);
    assertThat(status(l).error()).isNotNull();
  }

  @Test
  void closeHandsOverWithoutWaitingForAReadInFlight() {
    write(4);
    Listener<String> l = start(builder((e, f) -> {}).checkpoint(CheckpointPolicy.every(100, Duration.ofHours(1))));
    await().atMost(Duration.ofSeconds(10)).until(() -> l.status().get(0).processed() == 4);
    CountDownLatch release = new CountDownLatch(1);
    blocked.add(release);
    feed.blockNextPoll(release);
    await().atMost(Duration.ofSeconds(5)).until(() -> feed.pollBlocked());
    CompletableFuture<Void> closing = CompletableFuture.runAsync(l::close);
    await().atMost(Duration.ofSeconds(5)).until(closing::isDone);
    assertThat(release.getCount()).as("the read is still in flight").isEqualTo(1);
    LeaseRecord record = memory.read(LEASE).orElseThrow();
    assertThat(record.isHeld()).as("released for a peer").isFalse();
    assertThat(record.checkpoint().token()).as("what was processed is committed").isEqualTo("4");
  }

  @Test
  void anotherPartitionCountInTheSameGroupIsRefusedAtStart() {
    write(3);
    start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    assertThatThrownBy(() -> builder((e, f) -> {}).partitions(2).build().start())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("partition records for 1 partitions")
        .hasMessageContaining("configured with 2");
  }

  @Test
  void anotherPartitionCountIsRefusedOnAcquisitionWhenTheStartCheckCouldNotRun() {
    write(3);
    start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "3".equals(checkpoint()));
    store.failLists(new IllegalStateException("store briefly unreachable"), 1);
    List<String> second = new CopyOnWriteArrayList<>();
    Listener<String> two = start(builder((e, f) -> second.add(e.document())).partitions(2));
    // The records of 2 partitions are named apart from those of 1, so the second listener gets
    // both leases, and refuses each before delivering anything.
    await().atMost(Duration.ofSeconds(10)).until(() -> two.status().stream()
        .allMatch(s -> s.state() == PartitionState.FAILED));
    assertThat(two.status()).allSatisfy(s ->
        assertThat(s.error()).contains("partition records for 1 partitions"));
    assertThat(second).isEmpty();
  }

  @Test
  void aPartitionThatKeepsLosingItsLeaseShowsFlappingWithItsLastErrorWhileActive() {
    write(2);
    Listener<String> l = start(builder((e, f) -> {}));
    await().atMost(Duration.ofSeconds(10)).until(() -> "2".equals(checkpoint()));
    assertThat(status(l).flapping()).isFalse();
    for (int loss = 1; loss <= 3; loss++) {
      int expected = loss;
      long thiefEpoch = memory.steal(LEASE, "thief");
      await().atMost(Duration.ofSeconds(5)).until(() -> status(l).recentLosses() == expected);
      memory.release(new Lease(LEASE, "thief", thiefEpoch, Instant.MAX, null));
      await().atMost(Duration.ofSeconds(10)).until(() -> status(l).state() == PartitionState.ACTIVE
          && status(l).epoch() > thiefEpoch);
    }
    PartitionStatus s = status(l);
    assertThat(s.state()).isEqualTo(PartitionState.ACTIVE);
    assertThat(s.flapping()).as("three losses in the window").isTrue();
    assertThat(s.error()).as("the last loss is shown").isNotNull();
    assertThat(s.errorAt()).isNotNull();
  }
}
