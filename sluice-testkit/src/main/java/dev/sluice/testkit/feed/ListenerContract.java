package dev.sluice.testkit.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.FailurePolicy;
import dev.sluice.listener.Handler;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.listener.RetryPolicy;
import dev.sluice.testkit.feed.ChangeFeedContract.Source;
import dev.sluice.testkit.feed.ChangeFeedContract.Write;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The listener's deployment scenarios, run on every feed (MongoDB, PostgreSQL) with its real server
 * and lease store: three instances sharing four partitions and one of them stopping, two consumer
 * groups on one stream, a handler that throws an {@code Error}, a restart. Every change is
 * delivered, in order per key, and none twice across clean hand-overs.
 *
 * @param <D> the feed's document type
 */
public abstract class ListenerContract<D> extends SourceContract<D> {

  /** Versions delivered per key, in delivery order. */
  private static final class Deliveries {
    final Map<String, List<Long>> perKey = new ConcurrentHashMap<>();

    void add(String key, Long version) {
      perKey.computeIfAbsent(key, k -> Collections.synchronizedList(new ArrayList<>())).add(version);
    }

    boolean reached(int keys, long version) {
      if (perKey.size() < keys) {
        return false;
      }
      return perKey.values().stream().allMatch(l -> !l.isEmpty() && l.get(l.size() - 1) == version);
    }
  }

  private Listener<D> start(Source<D> s, String group, String owner, int partitions, Handler<D> handler,
      FailurePolicy failure) {
    Listener<D> l = Listener.builder(s.feed(), s.leaseStore())
        .group(group)
        .owner(owner)
        .partitions(partitions)
        .leaseDuration(Duration.ofSeconds(3))
        .renewInterval(Duration.ofSeconds(1))
        .acquireInterval(Duration.ofMillis(200))
        .pollWait(Duration.ofMillis(100))
        .bootstrap(BootstrapPolicy.oldest())
        .checkpoint(CheckpointPolicy.every(10, Duration.ofMillis(200)))
        .onFailure(failure)
        .handler(handler)
        .build()
        .start();
    closeAfter(l);
    return l;
  }

  private Listener<D> start(Source<D> s, String group, String owner, int partitions, Deliveries into) {
    return start(s, group, owner, partitions, (e, fence) -> into.add(s.writtenKey(e), s.version(e)),
        FailurePolicy.block(RetryPolicy.defaults()));
  }

  private static void awaitStarted(List<? extends Listener<?>> listeners, int partitions) {
    await().atMost(Duration.ofSeconds(60)).until(() -> listeners.stream().flatMap(l -> l.status().stream())
        .filter(p -> p.state() == PartitionState.ACTIVE && p.committed() != null).count() == partitions);
  }

  private static void writeAll(Source<?> s, int keys, long version) {
    List<Write> writes = new ArrayList<>();
    for (int k = 0; k < keys; k++) {
      writes.add(Write.set("k" + k, version));
    }
    s.write(writes);
  }

  @Test
  public void threeInstancesOnFourPartitionsDeliverEveryChangeOnceAndAStoppedOneHandsItsPartitionsOver() {
    Source<D> s = source();
    Deliveries seen = new Deliveries();
    List<Listener<D>> members = new ArrayList<>();
    for (String owner : List.of("a", "b", "c")) {
      members.add(start(s, "g", owner, 4, seen));
    }
    // The first to start takes everything; the quota (floor or ceil of 4/3) moves partitions to
    // the others as they join: an uneven split of one or two each.
    await().atMost(Duration.ofSeconds(60)).until(() -> members.stream().allMatch(m -> {
      long held = m.status().stream().filter(p -> p.state() == PartitionState.ACTIVE && p.committed() != null).count();
      return held >= 1 && held <= 2;
    }));
    awaitStarted(members, 4);
    writeAll(s, 60, 1);
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.reached(60, 1));
    members.get(1).close();
    awaitStarted(List.of(members.get(0), members.get(2)), 4);
    writeAll(s, 60, 2);
    writeAll(s, 60, 3);
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.reached(60, 3));
    assertThat(seen.perKey.values()).as("each key's versions once, in order, across the hand-over")
        .allSatisfy(versions -> assertThat(versions).containsExactly(1L, 2L, 3L));
  }

  @Test
  public void twoConsumerGroupsOnOneStreamEachGetEveryChange() {
    Source<D> s = source();
    Deliveries indexer = new Deliveries();
    Deliveries auditor = new Deliveries();
    Listener<D> a = start(s, "indexer", "one", 2, indexer);
    Listener<D> b = start(s, "auditor", "one", 1, auditor);
    awaitStarted(List.of(a), 2);
    awaitStarted(List.of(b), 1);
    writeAll(s, 20, 1);
    writeAll(s, 20, 2);
    await().atMost(Duration.ofSeconds(60)).until(() -> indexer.reached(20, 2) && auditor.reached(20, 2));
    assertThat(indexer.perKey.values()).allSatisfy(v -> assertThat(v).containsExactly(1L, 2L));
    assertThat(auditor.perKey.values()).allSatisfy(v -> assertThat(v).containsExactly(1L, 2L));
  }

  @Test
  public void aHandlerThatThrowsAnErrorIsRetriedInOrderNeverEndingThePartition() {
    Source<D> s = source();
    Deliveries seen = new Deliveries();
    AtomicInteger failures = new AtomicInteger();
    Handler<D> handler = (e, fence) -> {
      if (s.writtenKey(e).equals("k3") && failures.incrementAndGet() <= 3) {
        throw new StackOverflowError("handler bug on " + e.key());
      }
      seen.add(s.writtenKey(e), s.version(e));
    };
    Listener<D> l = start(s, "g", "a", 1, handler,
        FailurePolicy.block(RetryPolicy.attempts(2, Duration.ofMillis(10), Duration.ofMillis(50))));
    awaitStarted(List.of(l), 1);
    writeAll(s, 6, 1);
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.reached(6, 1));
    assertThat(failures.get()).isGreaterThanOrEqualTo(4);
    PartitionStatus status = l.status().get(0);
    assertThat(status.state()).isEqualTo(PartitionState.ACTIVE);
    assertThat(seen.perKey.values()).allSatisfy(v -> assertThat(v).containsExactly(1L));
    writeAll(s, 6, 2);
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.reached(6, 2));
  }

  @Test
  public void aRestartResumesAfterTheCommittedCheckpointWithNothingTwice() {
    Source<D> s = source();
    Deliveries seen = new Deliveries();
    Listener<D> first = start(s, "g", "a", 2, seen);
    awaitStarted(List.of(first), 2);
    writeAll(s, 30, 1);
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.reached(30, 1));
    first.close();
    writeAll(s, 30, 2);
    Listener<D> second = start(s, "g", "b", 2, seen);
    await().atMost(Duration.ofSeconds(60)).until(() -> seen.reached(30, 2));
    assertThat(second.status()).allSatisfy(p -> assertThat(p.state()).isEqualTo(PartitionState.ACTIVE));
    assertThat(seen.perKey.values()).allSatisfy(v -> assertThat(v).containsExactly(1L, 2L));
  }
}
