package dev.sluice.feed.fanout;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One cursor on a whole stream for every partition of it that this process holds
 * ({@code docs/adr/0074-one-reader-per-process.md}): N partitions in one process read the stream
 * once, not N times, and hold one server cursor, not N.
 *
 * <p>Each partition gets a {@link FeedCursor} of its own ({@link #join}; {@code SharedMember}) that behaves as if it read
 * the stream alone: its changes in stream order, its position advancing with the shared reader's
 * progress, its caught-up and end-of-stream states. There is no reader thread: whichever partition
 * finds its queue empty reads the next batch for all (one at a time) and hands each change to the
 * queue of the partition that owns its key ({@link PartitionSpec#indexOf}); changes without a key
 * go to every partition, as they do on a partition's own cursor.
 *
 * <p>A partition whose start lies behind the shared reader is served from a window of the most
 * recent changes when it is in it, otherwise it reads on a cursor of its own until it has caught
 * up with the shared reader, then joins it (the shared reader never goes back, so a partition far
 * behind never delays the others). A partition whose queue is full, or the partition with the most
 * queued when all queues together hold their limit, holds the reader back (backpressure: memory
 * stays bounded whatever the partition count), but only while it keeps taking changes: one that has not
 * polled for {@code stallTimeout} (a handler retrying a poison change, a stopped thread) is moved
 * to a cursor of its own, so it cannot stall the rest of the process.
 *
 * <p>Ordering positions needs the feed's help: {@code sortKey} maps a position to a string whose
 * natural order is the stream's order (MongoDB: the resume token's key string), or to null when it
 * cannot; a partition starting at such a position reads on a cursor of its own.
 *
 * <p>Only for feeds whose cursors need no {@linkplain FeedCursor#acknowledge acknowledgement}
 * (MongoDB): a partition reading through the shared cursor does not pass its commits on. A feed
 * that confirms positions to the source (a PostgreSQL slot per partition) keeps a cursor per
 * partition.
 *
 * <p>Failures: a failure of the shared cursor goes to every partition reading through it, after
 * the changes it had already queued for each, as a cursor of its own would have reported it; each
 * partition then re-opens at its checkpoint as usual. History loss goes only to the partitions whose
 * next change it lost; the partitions that were ahead continue on cursors of their own.
 *
 * @param <D> the feed's document type
 */
public final class SharedReader<D> {
  private static final Logger log = LoggerFactory.getLogger(SharedReader.class);

  /** Opens a cursor on {@code partition} of the stream, strictly after {@code after}. */
  @FunctionalInterface
  public interface Opener<D> {
    FeedCursor<D> open(PartitionSpec partition, Position after);
  }

  final String stream;
  final Opener<D> opener;
  final Function<Position, String> sortKey;
  final int batchSize;
  private final int queueLimit;
  private final int totalLimit;
  final long stallNanos;

  final ReentrantLock lock = new ReentrantLock();
  /**
   * Partitions waiting in a poll (for a read by another partition, or for room), oldest first, and
   * partitions parked instead ({@link FeedCursor#wakeInsteadOfWaiting}).
   */
  private final LinkedHashSet<SharedMember<D>> waiting = new LinkedHashSet<>();
  private final List<SharedMember<D>> members = new ArrayList<>();
  /** Members reading through the shared cursor, by partition index. */
  private final Map<Integer, List<SharedMember<D>>> shared = new HashMap<>();
  private FeedCursor<D> upstream;
  Position upstreamPosition;
  String upstreamKey;
  boolean upstreamCaughtUp;
  boolean upstreamEnded;
  String upstreamEndReason;
  /** A member is reading the next batch for all (outside the lock). */
  boolean reading;
  /** The most recent changes read, of every partition, oldest first. */
  private final SharedWindow<D> window;

  /**
   * @param stream the stream's name, for logs
   * @param opener opens a cursor on the stream; {@link PartitionSpec#single()} for the shared one
   * @param sortKey a position's place in the stream as a string in natural order, or null if unknown
   * @param batchSize the largest number of changes one poll of a partition returns
   * @param queueLimit changes queued for one partition before it holds the reader back
   * @param totalLimit changes queued for all partitions together before the one with the most holds
   *     the reader back: memory stays bounded whatever the partition count
   * @param windowSize changes of the whole stream kept for partitions that join a little behind
   * @param stallTimeout how long a partition with a full queue may go without polling before it is
   *     moved to a cursor of its own
   */
  public SharedReader(String stream, Opener<D> opener, Function<Position, String> sortKey, int batchSize,
      int queueLimit, int totalLimit, int windowSize, Duration stallTimeout) {
    this.stream = Objects.requireNonNull(stream, "stream");
    this.opener = Objects.requireNonNull(opener, "opener");
    this.sortKey = Objects.requireNonNull(sortKey, "sortKey");
    if (batchSize < 1 || queueLimit < batchSize || totalLimit < queueLimit || windowSize < 0) {
      throw new IllegalArgumentException("batchSize >= 1, queueLimit >= batchSize, totalLimit >= queueLimit and"
          + " windowSize >= 0, but were " + batchSize + ", " + queueLimit + ", " + totalLimit + ", " + windowSize);
    }
    this.batchSize = batchSize;
    this.queueLimit = queueLimit;
    this.totalLimit = totalLimit;
    this.window = new SharedWindow<>(windowSize);
    this.stallNanos = stallTimeout.toNanos();
  }

  /**
   * A cursor on {@code partition}, strictly after {@code after}: through the shared cursor when
   * it can serve that position, else on a cursor of its own until it catches up.
   *
   * @throws dev.sluice.feed.HistoryLostException if a cursor of its own cannot start there
   * @throws dev.sluice.feed.FeedException if the source cannot be reached
   */
  public FeedCursor<D> join(PartitionSpec partition, Position after) {
    Objects.requireNonNull(partition, "partition");
    Objects.requireNonNull(after, "after");
    String key = sortKey.apply(after);
    if (key == null) {
      return opener.open(partition, after);
    }
    SharedMember<D> m = new SharedMember<>(this, partition, after, key);
    lock.lock();
    try {
      if (attach(m, true)) {
        members.add(m);
        return m;
      }
    } finally {
      lock.unlock();
    }
    m.ownCursor(opener.open(partition, after));
    lock.lock();
    try {
      members.add(m);
    } finally {
      lock.unlock();
    }
    return m;
  }

  /** Partitions reading through the shared cursor right now, and on cursors of their own. */
  public int[] readers() {
    lock.lock();
    try {
      int sharing = (int) members.stream().filter(SharedMember::sharing).count();
      return new int[] {sharing, members.size() - sharing};
    } finally {
      lock.unlock();
    }
  }

  /** Changes queued for partitions reading through the shared cursor, all together (tests, metrics). */
  public int queued() {
    lock.lock();
    try {
      return shared.values().stream().flatMap(List::stream).mapToInt(m -> m.queue.size()).sum();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Makes {@code m} read through the shared cursor if it can from where it stands, opening the
   * shared cursor when there is none (only when {@code mayOpen}). Caller holds the lock.
   */
  boolean attach(SharedMember<D> m, boolean mayOpen) {
    int count = anyPartitionCount();
    if (count > 0 && count != m.partition.count()) {
      return false; // partitions of another layout: they never share one distribution
    }
    List<ChangeEvent<D>> missed = List.of();
    boolean ahead = false;
    if (upstream == null) {
      if (!mayOpen || reading) {
        return false;
      }
      upstream = opener.open(PartitionSpec.single(), m.floor());
      upstreamPosition = m.floor();
      upstreamKey = m.floorKey();
      upstreamCaughtUp = false;
      upstreamEnded = false;
      window.startAt(upstreamKey);
    } else if (m.floorKey().compareTo(upstreamKey) < 0) {
      if (!window.serves(m.floorKey())) {
        return false; // behind what the shared cursor can still give it
      }
      missed = window.after(m.floorKey(), m.partition);
    } else if (m.floorKey().compareTo(upstreamKey) > 0) {
      ahead = true; // ahead of the shared cursor: what it reads up to here is old
    }
    m.share(missed, ahead);
    shared.computeIfAbsent(m.partition.index(), i -> new ArrayList<>(1)).add(m);
    return true;
  }

  void detach(SharedMember<D> m) {
    m.unshare();
    List<SharedMember<D>> list = shared.get(m.partition.index());
    if (list != null) {
      list.remove(m);
      if (list.isEmpty()) {
        shared.remove(m.partition.index());
      }
    }
    if (shared.isEmpty() && !reading) {
      closeUpstream();
    }
  }

  private void closeUpstream() {
    if (upstream != null) {
      try {
        upstream.close();
      } catch (RuntimeException e) {
        log.debug("closing the shared cursor of {}: {}", stream, e.toString());
      }
      upstream = null;
      window.clear();
    }
  }

  /** Hands a batch read by the shared cursor to the partitions' queues. Caller holds the lock. */
  private void distribute(List<ChangeEvent<D>> batch, Position at, boolean caughtUp, boolean ended,
      String endReason) {
    int count = -1;
    for (ChangeEvent<D> e : batch) {
      String key = sortKey.apply(e.position());
      if (e.key().isEmpty()) {
        for (List<SharedMember<D>> list : shared.values()) {
          list.forEach(m -> m.offer(e, key));
        }
      } else {
        if (count < 0) {
          count = anyPartitionCount();
        }
        List<SharedMember<D>> list = count < 0 ? null : shared.get(PartitionSpec.indexOf(e.key(), count));
        if (list != null) {
          list.forEach(m -> m.offer(e, key));
        }
      }
      window.add(e, key);
    }
    upstreamPosition = at;
    String atKey = sortKey.apply(at);
    if (atKey == null) {
      window.broken();
    } else {
      upstreamKey = atKey;
    }
    upstreamCaughtUp = caughtUp;
    if (ended) {
      upstreamEnded = true;
      upstreamEndReason = endReason;
    }
  }

  private int anyPartitionCount() {
    for (List<SharedMember<D>> list : shared.values()) {
      if (!list.isEmpty()) {
        return list.get(0).partition.count();
      }
    }
    return -1;
  }

  /** The shared cursor failed: tell the partitions reading through it. Caller holds the lock. */
  private void failed(RuntimeException e) {
    boolean lost = e instanceof HistoryLostException;
    for (SharedMember<D> m : List.copyOf(members)) {
      if (!m.sharing()) {
        continue;
      }
      detach(m);
      if (lost && m.floorKey().compareTo(upstreamKey) > 0) {
        continue; // ahead of what was lost: reads on a cursor of its own from its position
      }
      m.fail(e);
    }
    closeUpstream();
  }

  /** {@code m} waits in a poll, or parked instead. Caller holds the lock. */
  void addWaiting(SharedMember<D> m) {
    waiting.add(m);
  }

  /** {@code m} no longer waits. Caller holds the lock. */
  void removeWaiting(SharedMember<D> m) {
    waiting.remove(m);
  }

  /** {@code m} was closed. Caller holds the lock. */
  void removeMember(SharedMember<D> m) {
    members.remove(m);
  }

  /** Wakes the partition that has waited longest, to read the next batch. Caller holds the lock. */
  void wakeNextReader() {
    if (!waiting.isEmpty()) {
      waiting.iterator().next().signal();
    }
  }

  /** Reads the next batch on the shared cursor for every partition. Caller holds the lock. */
  void readForAll(Duration wait) {
    FeedCursor<D> cursor = upstream;
    reading = true;
    List<ChangeEvent<D>> batch;
    Position at;
    boolean caught;
    boolean end;
    String reason;
    lock.unlock();
    try {
      batch = cursor.poll(wait);
      at = cursor.position();
      caught = cursor.caughtUp();
      end = cursor.ended();
      reason = end ? cursor.endReason() : null;
    } catch (RuntimeException e) {
      lock.lock();
      reading = false;
      failed(e);
      List.copyOf(waiting).forEach(SharedMember::signal);
      return;
    } catch (Error e) {
      lock.lock();
      reading = false;
      wakeNextReader();
      throw e;
    }
    lock.lock();
    reading = false;
    if (upstream == cursor) {
      distribute(batch, at, caught, end, reason);
    }
    if (shared.isEmpty()) {
      closeUpstream();
    }
    // Wake the partitions that have something now, and one more to read the next batch.
    boolean next = false;
    for (SharedMember<D> m : List.copyOf(waiting)) {
      if (!m.queue.isEmpty() || !m.sharing() || upstreamEnded) {
        m.signal();
      } else if (!next) {
        next = true;
        m.signal();
      }
    }
  }

  /**
   * The partition that holds the shared cursor back, or null: one whose queue is full, or, when
   * the partitions' queues hold {@code totalLimit} changes together, the one with the most.
   */
  SharedMember<D> holdingBack() {
    SharedMember<D> largest = null;
    int total = 0;
    for (List<SharedMember<D>> list : shared.values()) {
      for (SharedMember<D> m : list) {
        int size = m.queue.size();
        if (size >= queueLimit) {
          return m;
        }
        total += size;
        if (largest == null || size > largest.queue.size()) {
          largest = m;
        }
      }
    }
    return total >= totalLimit ? largest : null;
  }
}
