package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.ConfigurationException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Partitions run in turns on the listener's threads (ADR 0075): more partitions than threads
 * still deliver every change in key order, never on more threads than configured, and a handler
 * that blocks holds one thread while the other partitions go on on the rest.
 */
class PartitionThreadsTest {
  private static final String PREFIX = "sluice-threads-orders-";
  private final InMemoryLeaseStore store = new InMemoryLeaseStore(Clock.systemUTC());
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  private final List<Listener<String>> listeners = new ArrayList<>();

  @AfterEach
  void closeAll() {
    listeners.forEach(Listener::close);
  }

  private Listener<String> start(int partitions, int threads, Handler<String> handler) {
    Listener<String> l = EngineTimings.fast(Listener.builder(feed, store).group("threads").handler(handler))
        .partitions(partitions)
        .threads(threads)
        .build();
    listeners.add(l);
    return l.start();
  }

  /** The live threads that run this test's partitions (not its timer or lanes). */
  private static List<String> partitionThreads() {
    return Thread.getAllStackTraces().keySet().stream().map(Thread::getName)
        .filter(n -> n.startsWith(PREFIX) && n.substring(PREFIX.length()).matches("\\d+")).toList();
  }

  @Test
  void sixteenPartitionsOnTwoThreadsDeliverEveryChangeInKeyOrder() {
    Map<String, List<String>> seen = new ConcurrentHashMap<>();
    List<Integer> mostThreads = new CopyOnWriteArrayList<>();
    java.util.Set<String> handledOn = ConcurrentHashMap.newKeySet();
    Listener<String> l = start(16, 2, (change, fence) -> {
      seen.computeIfAbsent(change.key(), k -> new CopyOnWriteArrayList<>()).add(change.document());
      mostThreads.add(partitionThreads().size());
      handledOn.add(Thread.currentThread().getName());
    });
    await().atMost(Duration.ofSeconds(20))
        .until(() -> l.status().stream().allMatch(s -> s.state() == PartitionState.ACTIVE));
    for (int i = 0; i < 400; i++) {
      feed.append("k" + (i % 40), "v" + i);
    }
    await().atMost(Duration.ofSeconds(30))
        .until(() -> seen.values().stream().mapToInt(List::size).sum() == 400);
    for (int k = 0; k < 40; k++) {
      List<String> expected = new ArrayList<>();
      for (int i = k; i < 400; i += 40) {
        expected.add("v" + i);
      }
      assertThat(seen.get("k" + k)).as("k" + k).isEqualTo(expected);
    }
    assertThat(handledOn).isNotEmpty().allMatch(n -> n.startsWith(PREFIX)).hasSizeLessThanOrEqualTo(2);
    assertThat(mostThreads).allMatch(n -> n <= 2);
    assertThat(partitionThreads()).hasSizeLessThanOrEqualTo(2);
  }

  @Test
  void aHandlerThatBlocksHoldsOneThreadWhileTheOtherPartitionsGoOn() throws InterruptedException {
    CountDownLatch blocked = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    Map<String, List<String>> seen = new ConcurrentHashMap<>();
    Listener<String> l = start(4, 2, (change, fence) -> {
      if (change.key().equals("stuck")) {
        blocked.countDown();
        release.await();
      }
      seen.computeIfAbsent(change.key(), k -> new CopyOnWriteArrayList<>()).add(change.document());
    });
    await().atMost(Duration.ofSeconds(20))
        .until(() -> l.status().stream().allMatch(s -> s.state() == PartitionState.ACTIVE));
    feed.append("stuck", "s0");
    assertThat(blocked.await(20, TimeUnit.SECONDS)).isTrue();
    List<String> others = appendToOtherPartitionsThan(dev.sluice.feed.PartitionSpec.indexOf("stuck", 4));
    await().atMost(Duration.ofSeconds(20)).until(() -> others.stream().allMatch(seen::containsKey));
    assertThat(seen).doesNotContainKey("stuck");
    release.countDown();
    await().atMost(Duration.ofSeconds(20)).until(() -> seen.containsKey("stuck"));
  }

  /**
   * A partition blocked on a change that keeps failing waits for its next attempt without a thread:
   * on a listener with one thread, the other partitions go on, and the blocked one keeps its order.
   */
  @Test
  void aPartitionBlockedOnAFailingChangeLeavesTheOnlyThreadToTheOthers() {
    java.util.concurrent.atomic.AtomicBoolean fixed = new java.util.concurrent.atomic.AtomicBoolean();
    Map<String, List<String>> seen = new ConcurrentHashMap<>();
    List<String> order = new CopyOnWriteArrayList<>();
    Listener<String> l = EngineTimings.fast(Listener.builder(feed, store).group("threads").handler((change, fence) -> {
      if (change.key().equals("poison") && !fixed.get()) {
        throw new IllegalStateException("the target rejects it for now");
      }
      seen.computeIfAbsent(change.key(), k -> new CopyOnWriteArrayList<>()).add(change.document());
      order.add(change.document());
    }))
        .partitions(4)
        .threads(1)
        .onFailure(FailurePolicy.block(RetryPolicy.attempts(2, Duration.ofMillis(20), Duration.ofMillis(50))))
        .build();
    listeners.add(l);
    l.start();
    await().atMost(Duration.ofSeconds(20))
        .until(() -> l.status().stream().allMatch(s -> s.state() == PartitionState.ACTIVE));
    int blocked = dev.sluice.feed.PartitionSpec.indexOf("poison", 4);
    String sameKeyAfter = keyIn(blocked, "after");
    feed.append("poison", "p0");
    feed.append(sameKeyAfter, "a0");
    List<String> others = appendToOtherPartitionsThan(blocked);
    await().atMost(Duration.ofSeconds(20)).until(() -> others.stream().allMatch(seen::containsKey)
        && l.status().get(blocked).state() == PartitionState.BLOCKED);
    assertThat(seen).doesNotContainKeys("poison", sameKeyAfter);

    fixed.set(true);
    await().atMost(Duration.ofSeconds(20)).until(() -> seen.containsKey(sameKeyAfter));
    assertThat(order.indexOf("p0")).isLessThan(order.indexOf("a0"));
    await().atMost(Duration.ofSeconds(20)).until(() -> l.status().get(blocked).state() == PartitionState.ACTIVE);
  }

  /** Appends a change to each of 12 keys outside partition {@code partition} of 4; returns the keys. */
  private List<String> appendToOtherPartitionsThan(int partition) {
    List<String> keys = new ArrayList<>();
    for (int i = 0; keys.size() < 12; i++) {
      String key = "key" + i;
      if (dev.sluice.feed.PartitionSpec.indexOf(key, 4) != partition) {
        keys.add(key);
        feed.append(key, "v" + i);
      }
    }
    return keys;
  }

  /** A key of partition {@code partition} of 4 whose name starts with {@code prefix}. */
  private static String keyIn(int partition, String prefix) {
    for (int i = 0; ; i++) {
      if (dev.sluice.feed.PartitionSpec.indexOf(prefix + i, 4) == partition) {
        return prefix + i;
      }
    }
  }

  /** The default: bounded where cursors park; one per partition where each would hold a thread in its polls. */
  @Test
  void theDefaultThreadCountDependsOnWhetherTheFeedsCursorsPark() {
    dev.sluice.feed.ChangeFeed<String> parking = new dev.sluice.feed.ChangeFeed<>() {
      @Override
      public String stream() {
        return feed.stream();
      }

      @Override
      public boolean cursorsPark() {
        return true;
      }

      @Override
      public dev.sluice.feed.FeedCursor<String> open(dev.sluice.feed.PartitionSpec partition,
          dev.sluice.feed.StartPoint start) {
        return feed.open(partition, start);
      }
    };
    assertThat(Listener.builder(parking, store).group("threads").handler((c, f) -> { }).partitions(1000).build()
        .config().threads()).isEqualTo(ListenerConfig.DEFAULT_MAX_THREADS);
    assertThat(Listener.builder(parking, store).group("threads").handler((c, f) -> { }).partitions(8).build()
        .config().threads()).isEqualTo(8);
    assertThat(Listener.builder(feed, store).group("threads").handler((c, f) -> { }).partitions(100).build()
        .config().threads()).isEqualTo(100);
    assertThat(Listener.builder(feed, store).group("threads").handler((c, f) -> { }).partitions(100).threads(4)
        .build().config().threads()).isEqualTo(4);
  }

  @Test
  void refusesAThreadCountBelowOne() {
    assertThatThrownBy(() -> Listener.builder(feed, store).group("threads").threads(0))
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("threads");
  }
}
