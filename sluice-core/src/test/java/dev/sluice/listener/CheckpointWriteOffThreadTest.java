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
 * Pipelined checkpoints are written off the partition's thread (ADR 0120): while the store holds a
 * checkpoint write, the partition reads and handles on; at most one write is in flight and the
 * newest acknowledged position wins; no checkpoint passes a change whose flush is not
 * acknowledged; a stop writes the last acknowledged one. The store's commits are held by {@link
 * FaultyLeaseStore#holdCommits()} (renewals go on); the handler's flushes are futures the test
 * completes.
 */
class CheckpointWriteOffThreadTest {
  private static final String LEASE = "test-group/orders#0of1";
  private final FaultyLeaseStore store = new FaultyLeaseStore(new InMemoryLeaseStore(Clock.systemUTC()));
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  private final List<Listener<String>> listeners = new ArrayList<>();
  private final List<AckingHandler> handlers = new ArrayList<>();

  @AfterEach
  void closeAll() {
    store.releaseCommits();
    for (AckingHandler h : handlers) { // a stop waits for the flushes in flight: let them end
      h.acknowledgeFirst = Integer.MAX_VALUE;
      h.flushes.forEach(f -> f.complete(null));
    }
    listeners.forEach(Listener::close);
  }

  /** Acknowledges the first {@code acknowledgeFirst} flushes at once; the later ones stay pending. */
  private static final class AckingHandler implements Handler<String> {
    final List<String> seen = new CopyOnWriteArrayList<>();
    final List<CompletableFuture<Void>> flushes = new CopyOnWriteArrayList<>();
    volatile int acknowledgeFirst;

    @Override
    public void handle(ChangeEvent<String> event, Fence fence) {
      seen.add(event.document());
    }

    @Override
    public CompletionStage<Void> flushAsync(Fence fence) {
      CompletableFuture<Void> f = new CompletableFuture<>();
      flushes.add(f);
      if (flushes.size() <= acknowledgeFirst) {
        f.complete(null);
      }
      return f;
    }
  }

  private Listener<String> start(AckingHandler handler) {
    handlers.add(handler);
    Listener<String> l = EngineTimings.fast(Listener.builder(feed, store).group("test-group").handler(handler))
        .checkpoint(CheckpointPolicy.every(10, Duration.ofHours(1)).withFlushesInFlight(4))
        .build();
    listeners.add(l);
    return l.start();
  }

  private String checkpoint() {
    Position p = store.read(LEASE).map(r -> r.checkpoint()).orElse(null);
    return p == null ? null : p.token();
  }

  /** Starts on the empty feed, waits for the pinned start, then holds the store's commits. */
  private String startHoldingCommits(AckingHandler h) {
    start(h);
    await().atMost(Duration.ofSeconds(10)).until(() -> checkpoint() != null);
    String pinned = checkpoint();
    store.holdCommits();
    feed.appendValues(0, 100);
    return pinned;
  }

  @Test
  void theFeedGoesOnWhileACheckpointWriteIsHeldAndTheNewestAcknowledgedPositionWins() {
    AckingHandler h = new AckingHandler();
    h.acknowledgeFirst = 6; // flushes of changes 1-60 acknowledged at once; 61-100 pending
    String pinned = startHoldingCommits(h);
    int writesBefore = store.committed().size();

    // The first acknowledged checkpoint's write is held in the store, and the partition handled
    // every change meanwhile: nothing on its thread waited for the write.
    await().atMost(Duration.ofSeconds(10)).until(() -> store.commitsWaiting() == 1);
    await().atMost(Duration.ofSeconds(10)).until(() -> h.seen.size() == 100 && h.flushes.size() == 10);
    assertThat(store.commitsWaiting()).as("the write still held").isEqualTo(1);
    assertThat(checkpoint()).as("nothing written past the pinned start yet").isEqualTo(pinned);
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2))
        .until(() -> store.commitsWaiting() == 1);
    assertThat(store.mostCommitsAtOnce()).as("one write in flight at most").isEqualTo(1);

    // Released: the held write lands, then the newest acknowledged position (60) in one write;
    // never a position past it, whose flushes (70-100) are not acknowledged.
    store.releaseCommits();
    await().atMost(Duration.ofSeconds(10)).until(() -> "60".equals(checkpoint()));
    await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(2))
        .until(() -> "60".equals(checkpoint()));
    List<String> writes = store.committed().subList(writesBefore, store.committed().size()).stream()
        .map(Position::token).toList();
    // Six acknowledged checkpoints: the held write took the newest offered when it began (the
    // writer thread may start after several offers), then the newest (60) once, if it was not it.
    assertThat(writes).as("six acknowledged checkpoints coalesced").hasSizeBetween(1, 2).endsWith("60");
    assertThat(writes).allMatch(w -> List.of("10", "20", "30", "40", "50", "60").contains(w));
    assertThat(store.mostCommitsAtOnce()).isEqualTo(1);

    h.acknowledgeFirst = Integer.MAX_VALUE; // a flush asked for later (the stop's) too
    h.flushes.forEach(f -> f.complete(null));
    await().atMost(Duration.ofSeconds(10)).until(() -> "100".equals(checkpoint()));
    assertThat(h.seen).as("each change once, in order").containsExactlyElementsOf(InMemoryFeed.values(0, 100));
  }

  @Test
  void aStopWaitsForTheWriteInFlightThenWritesTheLastAcknowledgedCheckpoint() {
    AckingHandler h = new AckingHandler();
    h.acknowledgeFirst = Integer.MAX_VALUE;
    startHoldingCommits(h);
    await().atMost(Duration.ofSeconds(10)).until(() -> h.seen.size() == 100 && store.commitsWaiting() == 1);

    store.releaseCommits();
    listeners.get(0).close();
    assertThat(checkpoint()).as("the last acknowledged checkpoint written before the release").isEqualTo("100");
    assertThat(store.mostCommitsAtOnce()).isEqualTo(1);
  }
}
