package dev.sluice.testkit.lease;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.listener.Fence;
import dev.sluice.listener.ListenerObserver;
import dev.sluice.listener.PartitionState;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What one listener's observer and handler saw, for tests that cut a holder off from its lease
 * store and watch a peer take over (docs/adr/0100): each handler call with its fence and time,
 * the acquisition, the loss, the partition going LOST, and the last checkpoint committed. The
 * holder's and the peer's recorders share one list of calls; the static checks compare them.
 *
 * <p>Handlers call {@link #handled} with the change's sequence number and fence and write their
 * ground truth inside it, so the recorded time is the one the ground truth carries.
 */
public final class TakeoverRecorder implements ListenerObserver {
  /** One handler call as the handler saw it; {@code atNanos} on {@link System#nanoTime()}. */
  public record Call(String owner, long epoch, int seq, long atNanos) {}

  /** The ground-truth write of one handler call, given the call's time. */
  @FunctionalInterface
  public interface TruthWrite<E extends Exception> {
    void write(long atNanos) throws E;
  }

  private final List<Call> calls;
  private final AtomicInteger lastHandledSeq = new AtomicInteger(-1);
  private final AtomicInteger committedSeq = new AtomicInteger(-1);
  private final AtomicReference<Position> lastCommitted = new AtomicReference<>();
  private final AtomicLong lostAt = new AtomicLong();
  private final AtomicLong lostStateAt = new AtomicLong();
  private final AtomicReference<Lease> acquired = new AtomicReference<>();
  private final AtomicLong acquiredAt = new AtomicLong();
  private final AtomicInteger acquisitions = new AtomicInteger();
  private final AtomicReference<Fence> fence = new AtomicReference<>();

  /** A recorder adding to {@code calls}, a thread-safe list shared with the other listener's. */
  public TakeoverRecorder(List<Call> calls) {
    this.calls = calls;
  }

  /** Records the call of change {@code seq} under {@code fence}, then writes the ground truth. */
  public <E extends Exception> void handled(int seq, Fence fence, TruthWrite<E> truth) throws E {
    long at = System.nanoTime();
    calls.add(new Call(fence.owner(), fence.epoch(), seq, at));
    this.fence.set(fence);
    truth.write(at);
    lastHandledSeq.set(seq);
  }

  @Override
  public void acquired(Lease lease) {
    long at = System.nanoTime();
    acquisitions.incrementAndGet();
    if (acquired.compareAndSet(null, lease)) {
      acquiredAt.set(at);
    }
  }

  @Override
  public void lost(String lease, long epoch, String reason) {
    lostAt.compareAndSet(0, System.nanoTime());
  }

  @Override
  public void stateChanged(String lease, PartitionState from, PartitionState to) {
    if (to == PartitionState.LOST) {
      lostStateAt.compareAndSet(0, System.nanoTime());
    }
  }

  @Override
  public void committed(String lease, long epoch, Position position, int changes) {
    // Each checkpoint waits for its flush and runs on the thread that handles: it covers every
    // change handled so far.
    committedSeq.set(lastHandledSeq.get());
    lastCommitted.set(position);
  }

  /** The sequence number of the last change a committed checkpoint covers, or -1. */
  public int committedSeq() {
    return committedSeq.get();
  }

  /** The last checkpoint committed, or {@code null}. */
  public Position lastCommitted() {
    return lastCommitted.get();
  }

  /** When the loss was reported ({@code nanoTime}), or 0. */
  public long lostAt() {
    return lostAt.get();
  }

  /** When the partition went LOST ({@code nanoTime}), or 0. */
  public long lostStateAt() {
    return lostStateAt.get();
  }

  /** The first lease acquired, or {@code null}. */
  public Lease acquired() {
    return acquired.get();
  }

  /** When the first lease was acquired ({@code nanoTime}), or 0. */
  public long acquiredAt() {
    return acquiredAt.get();
  }

  public int acquisitions() {
    return acquisitions.get();
  }

  /** The fence of the last handler call, or {@code null}. */
  public Fence fence() {
    return fence.get();
  }

  /**
   * The latest the holder's local deadline can be when its store was cut off at {@code cutAt}:
   * every request that got through started before the cut, and the deadline is a request's start
   * plus the lease less the margin min(lease / 20, 500 ms) (docs/adr/0016, 0100).
   */
  public static long latestLocalDeadline(long cutAt, Duration lease) {
    long margin = Math.min(lease.toNanos() / 20, TimeUnit.MILLISECONDS.toNanos(500));
    return cutAt + lease.toNanos() - margin;
  }

  /**
   * The holder kept getting changes after the cut, and none of its handler calls started after its
   * latest possible local deadline.
   */
  public static void assertNoHandlingPastTheDeadline(List<Call> calls, String holder, long cutAt,
      Duration lease) {
    long latestDeadline = latestLocalDeadline(cutAt, lease);
    List<Call> holderCalls = calls.stream().filter(c -> c.owner().equals(holder)).toList();
    assertThat(holderCalls).as("holder's calls").isNotEmpty()
        .allSatisfy(c -> assertThat(c.atNanos() - latestDeadline)
            .as("holder's handler call of seq %d, ns after its latest possible local deadline",
                c.seq())
            .isNegative());
    assertThat(holderCalls.stream().filter(c -> c.atNanos() > cutAt))
        .as("the holder's handler kept getting changes after the cut").isNotEmpty();
  }

  /** The sequence number of {@code owner}'s first handler call. */
  public static int firstSeq(List<Call> calls, String owner) {
    return calls.stream().filter(c -> c.owner().equals(owner)).mapToInt(Call::seq).findFirst()
        .orElseThrow(() -> new AssertionError(owner + " handled nothing"));
  }

  /**
   * Per key of the ground truth, only the holder's and the peer's epochs wrote, and every write of
   * the holder came before every write of the peer: never two owners handling one key at once.
   *
   * @param spans per key, per epoch, the first and last write time ({@code nanoTime})
   */
  public static void assertOwnersNeverOverlap(Map<String, Map<Long, long[]>> spans,
      long holderEpoch, long peerEpoch) {
    assertThat(spans).as("keys of the ground truth").isNotEmpty();
    spans.forEach((key, byEpoch) -> {
      assertThat(byEpoch).as("owners of key %s", key).containsOnlyKeys(holderEpoch, peerEpoch);
      assertThat(byEpoch.get(holderEpoch)[1])
          .as("holder's last write of key %s before the peer's first", key)
          .isLessThan(byEpoch.get(peerEpoch)[0]);
    });
  }
}
