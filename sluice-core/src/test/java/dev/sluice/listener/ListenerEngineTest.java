package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.ConfigurationException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.deadletter.DeadLetters;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.deadletter.StaleParkException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The engine's logic against in-memory reference implementations of the SPIs. The same
 * guarantees are tested against real servers and real processes in the backend modules.
 */
class ListenerEngineTest {
  private final InMemoryLeaseStore store = new InMemoryLeaseStore(Clock.systemUTC());
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  private final List<Listener<String>> listeners = new ArrayList<>();

  @AfterEach
  void closeAll() {
    listeners.forEach(Listener::close);
  }

  private Listener.Builder<String> builder(Handler<String> handler) {
    return EngineTimings.fast(Listener.builder(feed, store).group("test-group").handler(handler));
  }

  private Listener<String> start(Listener.Builder<String> b) {
    Listener<String> l = b.build();
    listeners.add(l);
    return l.start();
  }

  private static final class Recorder implements Handler<String> {
    final List<ChangeEvent<String>> seen = new CopyOnWriteArrayList<>();
    final List<Long> epochs = new CopyOnWriteArrayList<>();

    @Override
    public void handle(ChangeEvent<String> event, Fence fence) {
      seen.add(event);
      epochs.add(fence.epoch());
    }

    List<String> values() {
      return seen.stream().map(ChangeEvent::document).toList();
    }
  }

  private void write(int from, int to) {
    feed.appendValues(from, to);
  }

  private static List<String> expected(int from, int to) {
    return InMemoryFeed.values(from, to);
  }

  @Test
  void deliversEveryChangeInOrderWithTheFenceAndCommitsEachOne() {
    write(0, 50);
    Recorder rec = new Recorder();
    Listener<String> l = start(builder(rec).checkpoint(CheckpointPolicy.everyChange()));

    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 50);
    assertThat(rec.values()).containsExactlyElementsOf(expected(0, 50));
    assertThat(rec.epochs).containsOnly(store.read("test-group/orders#0of1").orElseThrow().epoch());
    await().atMost(Duration.ofSeconds(5))
        .until(() -> Position.of("50").token().equals(store.read("test-group/orders#0of1").orElseThrow().checkpoint().token()));
    assertThat(l.status()).singleElement().satisfies(s -> {
      assertThat(s.state()).isEqualTo(PartitionState.ACTIVE);
      assertThat(s.processed()).isEqualTo(50);
    });
  }

  @Test
  void aRestartResumesAfterTheCheckpointWithRedeliveryBoundedByTheBatch() {
    write(0, 40);
    Recorder first = new Recorder();
    Listener<String> l1 = start(builder(first).checkpoint(CheckpointPolicy.every(10, Duration.ofHours(1))));
    await().atMost(Duration.ofSeconds(10)).until(() -> first.seen.size() == 40);
    l1.close(); // a clean stop commits what was processed
    write(40, 60);

    Recorder second = new Recorder();
    start(builder(second).checkpoint(CheckpointPolicy.every(10, Duration.ofHours(1))));
    await().atMost(Duration.ofSeconds(10)).until(() -> second.seen.size() >= 20);

    assertThat(second.values()).containsExactlyElementsOf(expected(40, 60));
    assertThat(second.epochs.get(0)).isGreaterThan(first.epochs.get(0));
  }

  @Test
  void batchedCheckpointsCommitEveryNChangesOrAfterTheDelay() {
    write(0, 95);
    Recorder rec = new Recorder();
    start(builder(rec).checkpoint(CheckpointPolicy.every(20, Duration.ofMillis(200))));

    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 95);
    // 4 commits of 20 by count, then the last 15 by time, plus the bootstrap pin.
    await().atMost(Duration.ofSeconds(5)).until(
        () -> "95".equals(store.read("test-group/orders#0of1").orElseThrow().checkpoint().token()));
    assertThat(store.commits()).isBetween(5, 7);
  }

  @Test
  void aLatestBootstrapIsPinnedSoACrashBeforeTheFirstChangeLosesNothing() {
    write(0, 5); // before the first start: skipped by "latest"
    Recorder first = new Recorder();
    Listener<String> l1 = start(builder(first).bootstrap(BootstrapPolicy.latest()));
    await().atMost(Duration.ofSeconds(10)).until(() -> store.read("test-group/orders#0of1").map(r -> r.checkpoint() != null).orElse(false));
    l1.close();
    write(5, 10); // figure 4b: written while no listener runs, before any change was processed

    Recorder second = new Recorder();
    start(builder(second).bootstrap(BootstrapPolicy.latest()));
    await().atMost(Duration.ofSeconds(10)).until(() -> second.seen.size() == 5);
    assertThat(first.seen).isEmpty();
    assertThat(second.values()).containsExactlyElementsOf(expected(5, 10));
  }

  @Test
  void theOldestBootstrapSeesWritesMadeBeforeTheFirstStart() {
    write(0, 10); // figure 4a
    Recorder rec = new Recorder();
    start(builder(rec));
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 10);
    assertThat(rec.values()).containsExactlyElementsOf(expected(0, 10));
  }

  @Test
  void onlyOneOfSeveralInstancesDeliversAndAnotherTakesOverWhenItStops() {
    write(0, 30);
    Recorder a = new Recorder();
    Recorder b = new Recorder();
    Listener<String> la = start(builder(a).owner("a").checkpoint(CheckpointPolicy.everyChange()));
    await().atMost(Duration.ofSeconds(10)).until(() -> a.seen.size() == 30);
    start(builder(b).owner("b").checkpoint(CheckpointPolicy.everyChange()));
    write(30, 40);
    await().atMost(Duration.ofSeconds(10)).until(() -> a.seen.size() == 40);
    assertThat(b.seen).isEmpty();

    la.close();
    write(40, 50);
    await().atMost(Duration.ofSeconds(10)).until(() -> b.seen.size() == 10);
    assertThat(b.values()).containsExactlyElementsOf(expected(40, 50));
    assertThat(b.epochs.get(0)).isGreaterThan(a.epochs.get(0));
  }

  @Test
  void aLostLeaseStopsDeliveryWithinOneRenewInterval() {
    AtomicReference<String> stolenBy = new AtomicReference<>();
    Recorder rec = new Recorder();
    CountDownLatch lost = new CountDownLatch(1);
    start(builder(rec).owner("victim").observer(new ListenerObserver() {
      @Override
      public void lost(String lease, long epoch, String reason) {
        lost.countDown();
      }
    }));
    write(0, 10);
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 10);

    long newEpoch = store.steal("test-group/orders#0of1", "thief");
    stolenBy.set("thief");
    long stolenAt = System.nanoTime();
    await().atMost(Duration.ofSeconds(5)).until(() -> lost.getCount() == 0);
    long detectedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - stolenAt);
    int seenAtLoss = rec.seen.size();
    write(10, 20);

    assertThat(detectedMillis).as("detected within about one renew interval").isLessThan(2_000);
    await().during(Duration.ofMillis(500)).atMost(Duration.ofSeconds(2)).until(() -> rec.seen.size() == seenAtLoss);
    assertThat(store.read("test-group/orders#0of1").orElseThrow().epoch()).isEqualTo(newEpoch);
    assertThat(store.read("test-group/orders#0of1").orElseThrow().owner()).isEqualTo(stolenBy.get());
  }

  @Test
  void aRejectedFencedWriteAfterATakeoverStopsThePartitionWithoutCommittingTheChange() {
    write(0, 5);
    AtomicInteger calls = new AtomicInteger();
    List<String> lostReasons = new CopyOnWriteArrayList<>();
    start(builder((event, fence) -> {
      if (calls.incrementAndGet() == 3) {
        store.steal("test-group/orders#0of1", "thief"); // a peer took over meanwhile
        throw new StaleFenceException(fence, "target doc " + event.key());
      }
    }).checkpoint(CheckpointPolicy.everyChange()).observer(new ListenerObserver() {
      @Override
      public void lost(String lease, long epoch, String reason) {
        lostReasons.add(reason);
      }
    }));

    await().atMost(Duration.ofSeconds(10)).until(() -> !lostReasons.isEmpty());
    assertThat(store.read("test-group/orders#0of1").orElseThrow().checkpoint().token())
        .as("the change whose fenced write was rejected is not committed").isEqualTo("2");
  }

  @Test
  void aRejectedFencedWriteWhileTheLeaseIsStillHeldGoesToTheFailurePolicyInsteadOfLivelocking() {
    // A target written under two leases (two streams into one summary document): the fence is
    // not scoped to this lease, and re-acquiring with a higher epoch would be rejected again.
    write(0, 5);
    AtomicInteger calls = new AtomicInteger();
    List<String> lostReasons = new CopyOnWriteArrayList<>();
    List<Throwable> failures = new CopyOnWriteArrayList<>();
    start(builder((event, fence) -> {
      if (calls.incrementAndGet() == 3) {
        throw new StaleFenceException(fence, "summary doc");
      }
    }).checkpoint(CheckpointPolicy.everyChange()).observer(new ListenerObserver() {
      @Override
      public void lost(String lease, long epoch, String reason) {
        lostReasons.add(reason);
      }

      @Override
      public void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {
        failures.add(error);
      }
    }));

    await().atMost(Duration.ofSeconds(10)).until(() -> "5".equals(
        store.read("test-group/orders#0of1").orElseThrow().checkpoint().token()));
    assertThat(lostReasons).as("the lease was never lost").isEmpty();
    assertThat(store.read("test-group/orders#0of1").orElseThrow().epoch())
        .as("no re-acquisition").isEqualTo(listeners.get(0).status().get(0).epoch());
    assertThat(failures).hasSize(1);
    assertThat(failures.get(0).getMessage()).contains("still holds lease").contains("summary doc");
  }

  @Test
  void aFailingHandlerIsRetriedWithBackoffAndBlocksThePartitionUntilItSucceeds() {
    write(0, 3);
    AtomicInteger failuresLeft = new AtomicInteger(4);
    Recorder rec = new Recorder();
    List<Integer> attempts = new CopyOnWriteArrayList<>();
    start(builder((event, fence) -> {
      if (event.document().equals("v1") && failuresLeft.getAndDecrement() > 0) {
        throw new IllegalStateException("downstream unavailable");
      }
      rec.handle(event, fence);
    }).onFailure(FailurePolicy.block(RetryPolicy.attempts(2, Duration.ofMillis(10), Duration.ofMillis(40))))
        .observer(new ListenerObserver() {
          @Override
          public void handlerFailed(ChangeEvent<?> event, int attempt, Throwable error) {
            attempts.add(attempt);
          }
        }));

    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 3);
    assertThat(rec.values()).containsExactly("v0", "v1", "v2");
    assertThat(attempts).containsExactly(1, 2, 3, 4);
  }

  /** Dead-letter store in memory, for the engine's unit tests (entries per scope, fenced per partition). */
  private static final class MemoryDeadLetters implements DeadLetterStore<String> {
    /** By scope + '|' + event id. */
    final Map<String, ParkedChange<String>> entries = Collections.synchronizedMap(new LinkedHashMap<>());
    /** While positive, {@link #parkedKeys} fails as an unreachable store would. */
    final AtomicInteger unreachableReads = new AtomicInteger();
    final AtomicInteger hasParkedQueries = new AtomicInteger();
    private final Map<String, Long> epochs = new HashMap<>();

    @Override
    public void park(ParkedChange<String> change) {
      synchronized (entries) {
        String partition = change.scope() + "#" + change.partition();
        long latest = epochs.getOrDefault(partition, 0L);
        if (change.epoch() > 0 && change.epoch() < latest) {
          throw new StaleParkException(change.scope(), change.partition(), change.epoch(), latest);
        }
        epochs.put(partition, Math.max(latest, change.epoch()));
        entries.putIfAbsent(change.scope() + "|" + change.event().id(), change);
      }
    }

    private java.util.stream.Stream<ParkedChange<String>> in(String scope) {
      return entries.values().stream().filter(p -> p.scope().equals(scope));
    }

    @Override
    public boolean hasParked(String stream, int partition, String key) {
      hasParkedQueries.incrementAndGet();
      synchronized (entries) {
        return in(stream).anyMatch(p -> p.partition() == partition && p.event().key().equals(key));
      }
    }

    @Override
    public Set<String> parkedKeys(String stream, int partition, int limit) {
      if (unreachableReads.getAndDecrement() > 0) {
        throw new IllegalStateException("dead-letter store unreachable");
      }
      synchronized (entries) {
        return in(stream).filter(p -> p.partition() == partition)
            .map(p -> p.event().key()).distinct().limit(limit)
            .collect(Collectors.toCollection(LinkedHashSet::new));
      }
    }

    @Override
    public List<ParkedChange<String>> list(String stream, int limit) {
      synchronized (entries) {
        return in(stream).limit(limit).toList();
      }
    }

    @Override
    public List<ParkedChange<String>> listKey(String stream, String key) {
      synchronized (entries) {
        return in(stream).filter(p -> p.event().key().equals(key)).toList();
      }
    }

    @Override
    public boolean remove(String stream, String eventId) {
      return entries.remove(stream + "|" + eventId) != null;
    }
  }

  /** Parks every change of key "poison" while {@code broken} is set; records the others. */
  private Listener<String> poisonListener(Recorder rec, AtomicBoolean broken, MemoryDeadLetters dlq,
      int maxCachedKeys) {
    return start(builder((event, fence) -> {
      if (broken.get() && event.key().startsWith("poison")) {
        throw new IllegalArgumentException("cannot map " + event.document());
      }
      rec.handle(event, fence);
    }).onFailure(FailurePolicy.park(RetryPolicy.attempts(1, Duration.ofMillis(5), Duration.ofMillis(10)),
        dlq, maxCachedKeys)));
  }

  @Test
  void afterReplayingEveryParkedChangeOfAKeyNewChangesOfThatKeyFlowAgain() {
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    Recorder rec = new Recorder();
    AtomicBoolean broken = new AtomicBoolean(true);
    poisonListener(rec, broken, dlq, 100);
    feed.append("poison", "v0");
    feed.append("poison", "v1");
    feed.append("good", "v2");
    await().atMost(Duration.ofSeconds(10)).until(() -> dlq.entries.size() == 2 && rec.seen.size() == 1);

    broken.set(false); // the bug is fixed; the operator replays the key
    List<String> replayed = new CopyOnWriteArrayList<>();
    DeadLetters.ReplayResult r = DeadLetters.of(dlq).replayKey("test-group/orders", "poison",
        (e, f) -> replayed.add(e.document()), new Fence("replay", "operator", 0));
    assertThat(r.complete()).isTrue();
    assertThat(replayed).containsExactly("v0", "v1");

    feed.append("poison", "v3");
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.values().contains("v3"));
    assertThat(dlq.entries).isEmpty();
  }

  @Test
  void afterDiscardingEveryParkedChangeOfAKeyNewChangesOfThatKeyFlowAgain() {
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    Recorder rec = new Recorder();
    AtomicBoolean broken = new AtomicBoolean(true);
    poisonListener(rec, broken, dlq, 100);
    feed.append("poison", "v0");
    feed.append("good", "v1");
    await().atMost(Duration.ofSeconds(10)).until(() -> dlq.entries.size() == 1 && rec.seen.size() == 1);

    broken.set(false);
    assertThat(DeadLetters.of(dlq).discardKey("test-group/orders", "poison")).isEqualTo(1);
    feed.append("poison", "v2");
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.values().contains("v2"));
    assertThat(dlq.entries).isEmpty();
  }

  @Test
  void loadingParkedKeysIsBounded() {
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    for (int k = 0; k < 20; k++) { // a previous owner parked 20 keys
      feed.append("poison" + k, "p" + k);
    }
    Recorder first = new Recorder();
    AtomicBoolean broken = new AtomicBoolean(true);
    Listener<String> l1 = poisonListener(first, broken, dlq, 3);
    await().atMost(Duration.ofSeconds(10)).until(() -> dlq.entries.size() == 20);
    l1.close();

    // The next owner holds at most 3 keys in memory and still parks behind every parked key.
    broken.set(false);
    Recorder second = new Recorder();
    poisonListener(second, broken, dlq, 3);
    for (int k = 0; k < 20; k++) {
      feed.append("poison" + k, "q" + k);
    }
    feed.append("good", "end");
    await().atMost(Duration.ofSeconds(10)).until(() -> second.values().contains("end"));
    assertThat(second.values()).containsExactly("end");
    assertThat(dlq.entries).hasSize(40);
    assertThat(dlq.hasParkedQueries.get()).as("keys beyond the cache are asked of the store").isPositive();
  }

  @Test
  void twoGroupsSharingADeadLetterStoreNeverBlockEachOthersKeys() {
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    Recorder indexer = new Recorder();
    Recorder invalidator = new Recorder();
    start(builder((event, fence) -> {
      if (event.key().equals("poison")) {
        throw new IllegalArgumentException("the indexer cannot map " + event.document());
      }
      indexer.handle(event, fence);
    }).group("indexer").onFailure(FailurePolicy.park(RetryPolicy.attempts(1, Duration.ofMillis(5), Duration.ofMillis(10)), dlq)));
    start(builder(invalidator).group("invalidator").onFailure(FailurePolicy.park(RetryPolicy.attempts(1, Duration.ofMillis(5), Duration.ofMillis(10)), dlq)));
    for (int i = 0; i < 10; i++) {
      feed.append(i % 2 == 0 ? "poison" : "good", "v" + i);
    }
    await().atMost(Duration.ofSeconds(10)).until(() -> invalidator.seen.size() == 10 && indexer.seen.size() == 5);
    assertThat(invalidator.values()).containsExactlyElementsOf(expected(0, 10));
    assertThat(dlq.listKey("indexer/orders", "poison")).hasSize(5);
    assertThat(dlq.list("invalidator/orders", 100)).isEmpty();
  }

  @Test
  void aStaleOwnersParkAfterATakeoverIsRefused() {
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    CountDownLatch inHandler = new CountDownLatch(1);
    CountDownLatch takenOver = new CountDownLatch(1);
    Recorder rec = new Recorder();
    List<String> lostReasons = new CopyOnWriteArrayList<>();
    // The stale owner: its handler stalls on v0 until a newer owner has parked, then fails.
    start(builder((event, fence) -> {
      inHandler.countDown();
      takenOver.await();
      throw new IllegalArgumentException("cannot map " + event.document());
    }).observer(new ListenerObserver() {
      @Override
      public void lost(String lease, long epoch, String reason) {
        lostReasons.add(reason);
      }
    }).onFailure(FailurePolicy.park(RetryPolicy.attempts(1, Duration.ofMillis(5), Duration.ofMillis(10)), dlq)));
    feed.append("poison", "v0");
    await().atMost(Duration.ofSeconds(10)).until(() -> inHandler.getCount() == 0);

    // A newer owner (after a takeover) parks in the same partition with a higher epoch. (Here the
    // lease store does not know it, so this owner keeps getting leases below that epoch: every
    // park it tries is refused, none lands.)
    long staleEpoch = store.read("test-group/orders#0of1").orElseThrow().epoch();
    dlq.park(new ParkedChange<>(new ChangeEvent<>("orders:other", "orders", Position.of("99"),
        Operation.UPDATE, "other", null, "x", null, null), 0, "boom", 1, Instant.now(),
        staleEpoch + 1_000_000, "test-group/orders"));
    takenOver.countDown();

    await().atMost(Duration.ofSeconds(10)).until(() -> lostReasons.stream().anyMatch(r -> r.contains("stale")));
    assertThat(dlq.entries).containsOnlyKeys("test-group/orders|orders:other");
  }

  @Test
  void aPoisonChangeIsParkedWithLaterChangesOfItsKeyWhileOtherKeysFlow() {
    for (int i = 0; i < 6; i++) {
      feed.append(i % 2 == 0 ? "poison" : "good", "v" + i);
    }
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    Recorder rec = new Recorder();
    start(builder((event, fence) -> {
      if (event.document().equals("v0")) {
        throw new IllegalArgumentException("cannot map order v0");
      }
      rec.handle(event, fence);
    }).onFailure(FailurePolicy.park(RetryPolicy.attempts(3, Duration.ofMillis(5), Duration.ofMillis(10)), dlq)));

    await().atMost(Duration.ofSeconds(10)).until(() -> dlq.entries.size() == 3 && rec.seen.size() == 3);
    assertThat(rec.values()).containsExactly("v1", "v3", "v5");
    List<ParkedChange<String>> parked = dlq.listKey("test-group/orders", "poison");
    assertThat(parked).extracting(p -> p.event().document()).containsExactly("v0", "v2", "v4");
    assertThat(parked.get(0).error()).contains("IllegalArgumentException").contains("cannot map order v0");
    assertThat(parked.get(0).attempts()).isEqualTo(3);
    assertThat(parked.get(1).error()).contains("parked behind");
    await().atMost(Duration.ofSeconds(5)).until(() -> "6".equals(store.read("test-group/orders#0of1").orElseThrow().checkpoint().token()));
  }

  @Test
  void anUndecodableChangeIsParkedWithoutReachingTheHandlerWhileOtherKeysFlow() {
    feed.append("ok", "v0");
    feed.appendUndecodable("broken", "field 'amount' is not a number");
    feed.append("broken", "v2");
    feed.append("ok", "v3");
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    Recorder rec = new Recorder();
    start(builder(rec).onFailure(FailurePolicy.park(RetryPolicy.attempts(2, Duration.ofMillis(5), Duration.ofMillis(10)), dlq)));

    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 2 && dlq.entries.size() == 2);
    assertThat(rec.values()).containsExactly("v0", "v3");
    List<ParkedChange<String>> parked = dlq.listKey("test-group/orders", "broken");
    assertThat(parked.get(0).error()).contains("Undecodable change").contains("'amount' is not a number");
    assertThat(parked.get(1).event().document()).isEqualTo("v2");
  }

  @Test
  void anUnreachableDeadLetterStoreDelaysDeliveryInsteadOfKillingThePartition() {
    write(0, 5);
    MemoryDeadLetters dlq = new MemoryDeadLetters();
    dlq.unreachableReads.set(3);
    Recorder rec = new Recorder();
    Listener<String> l = start(builder(rec).onFailure(FailurePolicy.park(RetryPolicy.defaults(), dlq)));

    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 5);
    assertThat(dlq.unreachableReads.get()).isNegative();
    assertThat(l.status().get(0).state()).isEqualTo(PartitionState.ACTIVE);
  }

  @Test
  void aFailedFlushRedeliversFromTheLastCheckpointSoNothingIsLost() {
    write(0, 30);
    List<String> acked = new CopyOnWriteArrayList<>();
    List<String> pending = new CopyOnWriteArrayList<>();
    AtomicInteger flushes = new AtomicInteger();
    start(builder(new Handler<String>() {
      @Override
      public void handle(ChangeEvent<String> event, Fence fence) {
        pending.add(event.document());
      }

      @Override
      public void flush(Fence fence) {
        if (flushes.incrementAndGet() == 2) {
          pending.clear(); // the broker lost the unacknowledged batch
          throw new IllegalStateException("broker unavailable");
        }
        acked.addAll(pending);
        pending.clear();
      }
    }).checkpoint(CheckpointPolicy.every(10, Duration.ofHours(1))));

    await().atMost(Duration.ofSeconds(10)).until(() -> acked.size() >= 30);
    assertThat(acked).containsExactlyElementsOf(expected(0, 30));
  }

  @Test
  void aFlushFailingWhileTheListenerClosesStopsCleanly() throws Exception {
    write(0, 5);
    CountDownLatch handled = new CountDownLatch(5);
    CountDownLatch flushing = new CountDownLatch(1);
    CountDownLatch closing = new CountDownLatch(1);
    Listener<String> l = start(builder(new Handler<String>() {
      @Override
      public void handle(ChangeEvent<String> event, Fence fence) {
        handled.countDown();
      }

      @Override
      public void flush(Fence fence) throws Exception {
        flushing.countDown();
        closing.await(10, TimeUnit.SECONDS);
        throw new IllegalStateException("broker went away during shutdown");
      }
    }).checkpoint(CheckpointPolicy.every(100, Duration.ofMillis(50))));
    assertThat(handled.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(flushing.await(10, TimeUnit.SECONDS)).isTrue();

    Thread closer = new Thread(l::close);
    closer.start();
    await().atMost(Duration.ofSeconds(5)).until(() -> closer.getState() == Thread.State.WAITING
        || closer.getState() == Thread.State.TIMED_WAITING);
    closing.countDown();
    closer.join(TimeUnit.SECONDS.toMillis(20));

    assertThat(closer.isAlive()).isFalse();
    assertThat(l.status().get(0).state()).isEqualTo(PartitionState.STOPPED);
    assertThat(l.status().get(0).error()).isNull();
    // Nothing was acknowledged, so nothing was committed past the bootstrap pin.
    assertThat(store.read("test-group/orders#0of1").orElseThrow().checkpoint().token()).isEqualTo("0");
  }

  @Test
  void lostHistoryStopsThePartitionLoudlyByDefault() {
    write(0, 10);
    Recorder rec = new Recorder();
    Listener<String> l1 = start(builder(rec).checkpoint(CheckpointPolicy.everyChange()));
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 10);
    l1.close();
    write(10, 20);
    feed.trimBefore(15);

    List<HistoryLostException> reported = new CopyOnWriteArrayList<>();
    Recorder rec2 = new Recorder();
    Listener<String> l2 = start(builder(rec2).observer(new ListenerObserver() {
      @Override
      public void historyLost(String lease, HistoryLostException error, Position resumedAt) {
        reported.add(error);
      }
    }));

    await().atMost(Duration.ofSeconds(10)).until(() -> l2.status().get(0).state() == PartitionState.FAILED);
    assertThat(rec2.seen).isEmpty();
    assertThat(l2.status().get(0).error()).contains("History lost").contains("10").contains("no change was skipped");
    assertThat(reported).hasSize(1);
  }

  @Test
  void skipToLatestContinuesAndReportsTheGapExplicitly() {
    write(0, 10);
    Recorder rec = new Recorder();
    Listener<String> l1 = start(builder(rec).checkpoint(CheckpointPolicy.everyChange()));
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 10);
    l1.close();
    write(10, 20);
    feed.trimBefore(15);

    List<Position> resumedAt = new CopyOnWriteArrayList<>();
    Recorder rec2 = new Recorder();
    start(builder(rec2).onHistoryLost(HistoryLostPolicy.SKIP_TO_LATEST).observer(new ListenerObserver() {
      @Override
      public void historyLost(String lease, HistoryLostException error, Position at) {
        resumedAt.add(at);
      }
    }));
    await().atMost(Duration.ofSeconds(10)).until(() -> resumedAt.size() == 1);
    write(20, 25);

    await().atMost(Duration.ofSeconds(10)).until(() -> rec2.seen.size() == 5);
    assertThat(rec2.values()).containsExactlyElementsOf(expected(20, 25));
    assertThat(resumedAt.get(0).token()).isEqualTo("20");
  }

  @Test
  void aFeedFailureReopensAtTheCheckpointWithoutLosingChanges() {
    write(0, 20);
    Recorder rec = new Recorder();
    start(builder(rec).checkpoint(CheckpointPolicy.everyChange()));
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 20);
    feed.failNextPolls(3);
    write(20, 40);
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() >= 40);
    assertThat(rec.values()).containsExactlyElementsOf(expected(0, 40));
  }

  @Test
  void anUnexpectedFeedErrorRestartsTheCursorInsteadOfKillingThePartition() {
    write(0, 10);
    Recorder rec = new Recorder();
    Listener<String> l = start(builder(rec).checkpoint(CheckpointPolicy.everyChange()));
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 10);
    feed.crashNextPolls(2);
    write(10, 20);
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() >= 20);
    assertThat(rec.values()).containsExactlyElementsOf(expected(0, 20));
    // A poll already waiting when the crashes were set may deliver first; the crashes then come
    // after it. Either way the partition shows them while it retries and is ACTIVE after.
    await().atMost(Duration.ofSeconds(10)).until(() -> l.status().get(0).state() == PartitionState.ACTIVE
        && l.status().get(0).error() != null);
    PartitionStatus s = l.status().get(0);
    assertThat(s.error()).contains("injected driver bug");
    assertThat(s.attempts()).isZero();
    assertThat(s.nextAttemptAt()).isNull();
  }

  @Test
  void aPartitionRetryingItsFeedSaysSoWithTheErrorTheAttemptsAndTheNextTry() {
    write(0, 5);
    Recorder rec = new Recorder();
    Listener<String> l = start(builder(rec).checkpoint(CheckpointPolicy.everyChange()));
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 5);
    feed.failNextPolls(1_000);
    await().atMost(Duration.ofSeconds(10)).until(() -> l.status().get(0).attempts() >= 3);
    PartitionStatus retrying = l.status().get(0);
    assertThat(retrying.state()).isEqualTo(PartitionState.RETRYING);
    assertThat(retrying.error()).contains("reading the feed failed").contains("injected feed failure");
    assertThat(retrying.nextAttemptAt()).isNotNull();
    assertThat(retrying.epoch()).as("still held while it retries").isPositive();
    feed.failNextPolls(0);
    write(5, 10);
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() >= 10
        && l.status().get(0).state() == PartitionState.ACTIVE);
    assertThat(rec.values()).containsExactlyElementsOf(expected(0, 10));
    assertThat(l.status().get(0).attempts()).isZero();
    assertThat(l.status().get(0).nextAttemptAt()).isNull();
  }

  @Test
  void anEndedStreamStopsThePartitionCleanly() {
    write(0, 5);
    feed.end();
    Recorder rec = new Recorder();
    Listener<String> l = start(builder(rec));
    await().atMost(Duration.ofSeconds(10)).until(() -> l.status().get(0).state() == PartitionState.ENDED);
    assertThat(rec.values()).containsExactlyElementsOf(expected(0, 5));
    assertThat(store.read("test-group/orders#0of1").orElseThrow().checkpoint().token()).isEqualTo("5");
  }

  @Test
  void partitionsSplitTheStreamAcrossInstancesKeepingPerKeyOrder() {
    Map<String, List<String>> byKey = new ConcurrentHashMap<>();
    Handler<String> h = (event, fence) ->
        byKey.computeIfAbsent(event.key(), k -> new CopyOnWriteArrayList<>()).add(event.document());
    start(builder(h).owner("a").partitions(4));
    start(builder(h).owner("b").partitions(4));
    for (int i = 0; i < 400; i++) {
      feed.append("key-" + (i % 13), Integer.toString(i));
    }
    await().atMost(Duration.ofSeconds(15)).until(() -> byKey.values().stream().mapToInt(List::size).sum() >= 400);
    assertThat(byKey).hasSize(13);
    byKey.forEach((key, values) -> {
      List<Integer> ints = values.stream().map(Integer::parseInt).toList();
      assertThat(ints).as("order of %s", key).isSorted().doesNotHaveDuplicates();
    });
    assertThat(store.list("test-group/orders#")).extracting(LeaseRecord::name)
        .containsExactly("test-group/orders#0of4", "test-group/orders#1of4", "test-group/orders#2of4",
            "test-group/orders#3of4");
  }

  private static long active(Listener<String> l) {
    return l.status().stream().filter(s -> s.state() == PartitionState.ACTIVE).count();
  }

  @Test
  void twoConsumerGroupsOfOneStreamEachGetEveryChange() {
    // An indexer and a cache invalidator, built as the README shows, on one collection.
    Recorder indexer = new Recorder();
    Recorder invalidator = new Recorder();
    start(builder(indexer).group("indexer"));
    start(builder(invalidator).group("cache-invalidator"));
    write(0, 300);
    await().atMost(Duration.ofSeconds(15))
        .until(() -> indexer.seen.size() >= 300 && invalidator.seen.size() >= 300);
    assertThat(indexer.values()).isEqualTo(expected(0, 300));
    assertThat(invalidator.values()).isEqualTo(expected(0, 300));
    assertThat(store.read("indexer/orders#0of1")).isPresent();
    assertThat(store.read("cache-invalidator/orders#0of1")).isPresent();
  }

  @Test
  void aGroupIsRequiredAndValidated() {
    assertThatThrownBy(() -> Listener.builder(feed, store).handler((e, f) -> {}).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("group must be set");
    assertThatThrownBy(() -> Listener.builder(feed, store).group("a/b").handler((e, f) -> {}).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("group");
    assertThatThrownBy(() -> Listener.builder(new InMemoryFeed("shop.orders#2"), store).group("g")
        .handler((e, f) -> {}).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("stream")
        .hasMessageContaining("'#'");
    assertThatThrownBy(() -> builder((e, f) -> {}).leaseDuration(Duration.ofMillis(30))
        .renewInterval(Duration.ofMillis(10)).pollWait(Duration.ofMillis(5)).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("leaseDuration")
        .hasMessageContaining("at least PT1S");
    assertThatThrownBy(() -> builder((e, f) -> {}).leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofMillis(1500)).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("at most a third");
  }

  @Test
  void twoListenersWithTheSameOwnerLabelNeverShareOrTradeALease() {
    Recorder a = new Recorder();
    Recorder b = new Recorder();
    Listener<String> first = start(builder(a).owner("svc"));
    await().atMost(Duration.ofSeconds(10)).until(() -> active(first) == 1);
    Listener<String> second = start(builder(b).owner("svc"));
    assertThat(first.owner()).startsWith("svc/").isNotEqualTo(second.owner());
    long epoch = store.read("test-group/orders#0of1").orElseThrow().epoch();
    write(0, 50);
    await().atMost(Duration.ofSeconds(10)).until(() -> a.seen.size() == 50);
    // Several renew and acquire intervals later, still one holder and the same epoch.
    await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(3))
        .until(() -> store.read("test-group/orders#0of1").orElseThrow().epoch() == epoch);
    assertThat(b.seen).isEmpty();
    assertThat(active(second)).isZero();
  }

  @Test
  void partitionsAreSharedFairlyAndTakenBackWhenAnInstanceLeaves() {
    Recorder rec = new Recorder();
    Listener<String> a = start(builder(rec).owner("a").partitions(4));
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 4);

    Listener<String> b = start(builder(rec).owner("b").partitions(4));
    await().atMost(Duration.ofSeconds(15)).until(() -> active(a) == 2 && active(b) == 2);
    assertThat(store.list("test-group/orders#")).hasSize(4).allSatisfy(r -> assertThat(r.isHeld()).isTrue());

    b.close();
    await().atMost(Duration.ofSeconds(15)).until(() -> active(a) == 4);
    write(0, 40);
    await().atMost(Duration.ofSeconds(10)).until(() -> rec.seen.size() == 40);
  }

  @Test
  void badConfigurationIsRejectedNamingTheParameter() {
    assertThatThrownBy(() -> Listener.builder(feed, store).group("test-group").handler((e, f) -> {})
        .bootstrap(BootstrapPolicy.snapshot()).build())
        .as("a feed that cannot read a consistent snapshot refuses a snapshot bootstrap")
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("bootstrap Snapshot[] is not supported")
        .hasMessageContaining("stream 'orders'");
    assertThatThrownBy(() -> Listener.builder(feed, store).group("test-group").handler((e, f) -> {})
        .leaseDuration(Duration.ofSeconds(2)).renewInterval(Duration.ofSeconds(2)).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("renewInterval");
    assertThatThrownBy(() -> Listener.builder(feed, store).group("test-group").build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("handler");
    assertThatThrownBy(() -> Listener.builder(feed, store).group("test-group").partitions(0))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("partitions");
    assertThatThrownBy(() -> CheckpointPolicy.every(0, Duration.ZERO))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("maxChanges");
    assertThatThrownBy(() -> Listener.builder(feed, store).group("test-group").handler((e, f) -> {}).leaseDuration(Duration.ZERO).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("leaseDuration");
    assertThatThrownBy(() -> Listener.builder(feed, store).group("test-group").handler((e, f) -> {}).leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofMillis(500)).pollWait(Duration.ofSeconds(1)).build())
        .as("an explicit value is rejected, never clamped").isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("pollWait");
    assertThat(Listener.builder(feed, store).group("test-group").handler((e, f) -> {}).leaseDuration(Duration.ofMillis(1500))
        .renewInterval(Duration.ofMillis(100)).build().config().pollWait())
        .as("the default adapts to a short renew interval").isEqualTo(Duration.ofMillis(100));
  }

  /**
   * A stopped member's partition is taken by its peer as soon as the store reports the release,
   * not at the peer's next scheduled attempt: here that attempt is 30-60 s away, and the peer
   * takes over within seconds only because it was told (LeaseStore#watchReleases).
   */
  @Test
  void aReleasedPartitionIsTriedAtOnceByAPeerThatWasToldOfTheRelease() {
    InMemoryLeaseStore noticing = new InMemoryLeaseStore(Clock.systemUTC()).withReleaseNotices();
    Listener.Builder<String> slow = Listener.<String>builder(feed, noticing).group("test-group")
        .handler((e, f) -> { })
        .leaseDuration(Duration.ofMinutes(3))
        .renewInterval(Duration.ofMillis(300))
        .acquireInterval(Duration.ofSeconds(60))
        .pollWait(Duration.ofMillis(20));
    Listener<String> first = start(slow.owner("first"));
    await().atMost(Duration.ofSeconds(10)).until(() -> first.status().get(0).state() == PartitionState.ACTIVE);
    Listener<String> second = start(slow.owner("second"));
    await().atMost(Duration.ofSeconds(10)).until(() -> second.status().get(0).state() == PartitionState.ACQUIRING);

    first.close();
    await().atMost(Duration.ofSeconds(20)).until(() -> second.status().get(0).state() == PartitionState.ACTIVE);
    assertThat(noticing.read(second.status().get(0).lease()).orElseThrow().owner()).isEqualTo(second.owner());
  }
}
