package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Position;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Pipelined checkpoints (ADR 0073): the partition reads and handles on while flushes are pending,
 * at most {@code flushesInFlight} of them; a checkpoint covers only flushes that completed, in
 * the order they were asked for; a failed flush rewinds to the last checkpoint. The handler's
 * flushes are futures the test completes.
 */
class PipelinedCheckpointTest {
  private static final String LEASE = "test-group/orders#0of1";
  private final InMemoryLeaseStore store = new InMemoryLeaseStore(Clock.systemUTC());
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  private final List<Listener<String>> listeners = new ArrayList<>();

  private final List<AsyncHandler> handlers = new ArrayList<>();

  @AfterEach
  void closeAll() {
    // A failed assertion may leave flushes pending: complete them, so the close does not wait on them.
    for (AsyncHandler h : handlers) {
      h.completeAtOnce = true;
      h.flushes.forEach(f -> f.complete(null));
    }
    listeners.forEach(Listener::close);
  }

  private AsyncHandler handler() {
    AsyncHandler h = new AsyncHandler();
    handlers.add(h);
    return h;
  }

  /** Records what it was handed; each flush is a future the test completes (or, later, at once). */
  private static final class AsyncHandler implements Handler<String> {
    final List<String> seen = new CopyOnWriteArrayList<>();
    final List<CompletableFuture<Void>> flushes = new CopyOnWriteArrayList<>();
    /** How many changes had been handed over when each flush was asked for. */
    final List<Integer> coverage = new CopyOnWriteArrayList<>();
    volatile boolean completeAtOnce;

    @Override
    public void handle(ChangeEvent<String> event, Fence fence) {
      seen.add(event.document());
    }

    @Override
    public CompletionStage<Void> flushAsync(Fence fence) {
      CompletableFuture<Void> f = completeAtOnce ? CompletableFuture.completedFuture(null)
          : new CompletableFuture<>();
      flushes.add(f);
      coverage.add(seen.size());
      return f;
    }
  }

  private Listener<String> start(Handler<String> handler, CheckpointPolicy policy) {
    return start(handler, policy, 1);
  }

  private Listener<String> start(Handler<String> handler, CheckpointPolicy policy, int concurrency) {
    Listener<String> l = EngineTimings.fast(Listener.builder(feed, store).group("test-group").handler(handler))
        .concurrency(concurrency)
        .checkpoint(policy)
        .build();
    listeners.add(l);
    return l.start();
  }

  private void write(int from, int to) {
    feed.appendValues(from, to);
  }

  private static List<String> values(int from, int to) {
    return InMemoryFeed.values(from, to);
  }

  private String checkpoint() {
    Position p = store.read(LEASE).map(r -> r.checkpoint()).orElse(null);
    return p == null ? null : p.token();
  }

  @Test
  void readsOnWhileFlushesArePendingAndCommitsOnlyCompletedFlushesInOrder() {
    write(0, 100);
    AsyncHandler h = handler();
    start(h, CheckpointPolicy.every(10, Duration.ofHours(1)).withFlushesInFlight(3));

    // Four flushes asked for (the fourth goes over the bound of 3 pending): 40 changes handled,
    // none acknowledged, and the partition waits instead of reading on.
    await().atMost(Duration.ofSeconds(10)).until(() -> h.seen.size() == 40 && h.flushes.size() == 4);
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2))
        .until(() -> h.seen.size() == 40);
    assertThat(h.coverage).containsExactly(10, 20, 30, 40);
    String pinned = checkpoint();
    assertThat(pinned).as("only the bootstrap position is committed").isNotIn("10", "20", "30", "40");

    // The second flush completes first: nothing may be committed past the first, still pending.
    h.flushes.get(1).complete(null);
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2))
        .until(() -> java.util.Objects.equals(checkpoint(), pinned));

    // The first completes: one commit covers both, and the partition reads on to the next bound.
    h.flushes.get(0).complete(null);
    await().atMost(Duration.ofSeconds(10)).until(() -> "20".equals(checkpoint()));
    await().atMost(Duration.ofSeconds(10)).until(() -> h.seen.size() == 60 && h.flushes.size() == 6);

    h.completeAtOnce = true;
    h.flushes.forEach(f -> f.complete(null));
    await().atMost(Duration.ofSeconds(10)).until(() -> "100".equals(checkpoint()));
    assertThat(h.seen).containsExactlyElementsOf(values(0, 100));
  }

  /**
   * Issue 36 target 2 (ADR 0126): by default a flush, and the checkpoint write after it, is asked
   * for once per 1,000 changes of a backlog, not once per 100 as before. The flushes are held
   * pending, so the partition stops at the bound of 4 in flight plus one: 5,000 changes handled,
   * five flushes asked for, each covering 1,000 (the time bound of 1 s cannot come first: 5,000
   * in-memory changes are handled in milliseconds, and a time-due checkpoint would wait for the
   * pending flushes rather than ask for a sixth).
   */
  @Test
  void byDefaultAFlushAndItsCheckpointCover1000ChangesOfABacklog() {
    write(0, 6_000);
    AsyncHandler h = handler();
    start(h, CheckpointPolicy.defaults());

    await().atMost(Duration.ofSeconds(10)).until(() -> h.flushes.size() == 5);
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2)).until(() -> h.seen.size() == 5_000);
    assertThat(h.coverage).containsExactly(1_000, 2_000, 3_000, 4_000, 5_000);
    assertThat(CheckpointPolicy.defaults().maxChanges()).isEqualTo(CheckpointPolicy.DEFAULT_MAX_CHANGES);

    h.completeAtOnce = true;
    h.flushes.forEach(f -> f.complete(null));
    await().atMost(Duration.ofSeconds(10)).until(() -> "6000".equals(checkpoint()));
    assertThat(h.seen).containsExactlyElementsOf(values(0, 6_000));
  }

  @Test
  void withKeyedConcurrencyTooThePartitionHandlesOnWhileAFlushIsPending() {
    write(0, 100);
    AsyncHandler h = handler();
    start(h, CheckpointPolicy.every(10, Duration.ofHours(1)).withFlushesInFlight(3), 4);

    // The first flush stays pending while the partition handles past it, up to the bound.
    await().atMost(Duration.ofSeconds(10)).until(() -> h.flushes.size() == 4);
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2))
        .until(() -> h.flushes.size() == 4 && !h.flushes.get(0).isDone());
    assertThat(h.coverage.get(3)).isGreaterThanOrEqualTo(40);
    assertThat(h.seen.size()).isLessThan(100);
    String pinned = checkpoint();
    assertThat(pinned).isNotEqualTo("100");

    h.completeAtOnce = true;
    h.flushes.forEach(f -> f.complete(null));
    await().atMost(Duration.ofSeconds(10)).until(() -> h.seen.size() == 100);
    // The watermark moves by more than one at a time, so the last requests need not fall on 100:
    // the tail is committed by time (an hour here) or, as now, by a graceful stop.
    listeners.get(0).close();
    assertThat(checkpoint()).isEqualTo("100");
    assertThat(h.seen).containsExactlyInAnyOrderElementsOf(values(0, 100));
    // Each key's changes in order (keys are k0..k6, value i has key k<i % 7>).
    for (int k = 0; k < 7; k++) {
      assertThat(ofKey(h.seen, k)).isEqualTo(ofKey(values(0, 100), k));
    }
  }

  /** The values of key {@code k<key>} among {@code values}, in their order. */
  private static List<String> ofKey(List<String> values, int key) {
    return values.stream().filter(v -> Integer.parseInt(v.substring(1)) % 7 == key).toList();
  }

  @Test
  void aFailedFlushRewindsToTheLastCheckpointAndDeliversEverythingAfterItAgainInOrder() {
    write(0, 50);
    AsyncHandler h = handler();
    start(h, CheckpointPolicy.every(10, Duration.ofHours(1)).withFlushesInFlight(2));

    await().atMost(Duration.ofSeconds(10)).until(() -> h.flushes.size() == 3);
    h.flushes.get(0).complete(null);
    await().atMost(Duration.ofSeconds(10)).until(() -> "10".equals(checkpoint()));
    // It reads on to the bound again (flushes 2-4 pending) and waits for the second.
    await().atMost(Duration.ofSeconds(10)).until(() -> h.seen.size() == 40 && h.flushes.size() == 4);
    int handedBeforeFailure = h.seen.size();
    h.completeAtOnce = true;
    h.flushes.get(1).completeExceptionally(new IllegalStateException("broker refused"));
    h.flushes.forEach(f -> f.complete(null)); // later flushes succeed: they must not count

    await().atMost(Duration.ofSeconds(10)).until(() -> "50".equals(checkpoint()));
    assertThat(h.seen.subList(0, handedBeforeFailure)).containsExactlyElementsOf(values(0, handedBeforeFailure));
    assertThat(h.seen.subList(handedBeforeFailure, h.seen.size()))
        .as("after the failure: everything after checkpoint 10 again, in order")
        .containsExactlyElementsOf(values(10, 50));
  }

  @Test
  void withoutPipeliningEachCheckpointWaitsForItsFlush() {
    write(0, 30);
    AsyncHandler h = handler();
    start(h, CheckpointPolicy.every(10, Duration.ofHours(1)).withFlushesInFlight(0));

    await().atMost(Duration.ofSeconds(10)).until(() -> h.flushes.size() == 1);
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2))
        .until(() -> h.seen.size() == 10);
    h.completeAtOnce = true;
    h.flushes.get(0).complete(null);
    await().atMost(Duration.ofSeconds(10)).until(() -> "30".equals(checkpoint()));
    assertThat(h.coverage).containsExactly(10, 20, 30);
  }
}
