package dev.sluice.feed.fanout;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One cursor on a whole stream for every partition of it that this process holds
 * ({@code docs/adr/0074-one-reader-per-process.md}): N partitions in one process read the stream
 * once, not N times, and hold one server cursor, not N.
 *
 * <p>Each partition gets a {@link FeedCursor} of its own ({@link #join}) that behaves as if it read
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

  private final String stream;
  private final Opener<D> opener;
  private final Function<Position, String> sortKey;
  private final int batchSize;
  private final int queueLimit;
  private final int totalLimit;
  private final int windowSize;
  private final long stallNanos;

  private final ReentrantLock lock = new ReentrantLock();
  /**
   * Partitions waiting in a poll (for a read by another partition, or for room), oldest first, and
   * partitions parked instead ({@link FeedCursor#wakeInsteadOfWaiting}).
   */
  private final LinkedHashSet<Member> waiting = new LinkedHashSet<>();
  private final List<Member> members = new ArrayList<>();
  /** Members reading through the shared cursor, by partition index. */
  private final Map<Integer, List<Member>> shared = new HashMap<>();
  private FeedCursor<D> upstream;
  private Position upstreamPosition;
  private String upstreamKey;
  private boolean upstreamCaughtUp;
  private boolean upstreamEnded;
  private String upstreamEndReason;
  /** A member is reading the next batch for all (outside the lock). */
  private boolean reading;
  /** The most recent changes read, of every partition, oldest first. */
  private final ArrayDeque<Keyed<D>> window = new ArrayDeque<>();
  /** Every change after this key up to {@link #upstreamKey} is in {@link #window}. */
  private String windowFloorKey;

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
    this.windowSize = windowSize;
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
    Member m = new Member(partition, after, key);
    lock.lock();
    try {
      if (attach(m, true)) {
        members.add(m);
        return m;
      }
    } finally {
      lock.unlock();
    }
    m.own = opener.open(partition, after);
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
      int sharing = (int) members.stream().filter(m -> m.sharing).count();
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
  private boolean attach(Member m, boolean mayOpen) {
    int count = anyPartitionCount();
    if (count > 0 && count != m.partition.count()) {
      return false; // partitions of another layout: they never share one distribution
    }
    if (upstream == null) {
      if (!mayOpen || reading) {
        return false;
      }
      upstream = opener.open(PartitionSpec.single(), m.floor);
      upstreamPosition = m.floor;
      upstreamKey = m.floorKey;
      upstreamCaughtUp = false;
      upstreamEnded = false;
      window.clear();
      windowFloorKey = upstreamKey;
    } else if (m.floorKey.compareTo(upstreamKey) < 0) {
      if (windowFloorKey == null || m.floorKey.compareTo(windowFloorKey) < 0) {
        return false; // behind what the shared cursor can still give it
      }
      for (Keyed<D> k : window) {
        if (k.key.compareTo(m.floorKey) > 0 && m.partition.receives(k.event.key())) {
          m.queue.add(k.event);
        }
      }
    } else if (m.floorKey.compareTo(upstreamKey) > 0) {
      m.skipThrough = m.floorKey; // ahead of the shared cursor: what it reads up to here is old
    }
    m.sharing = true;
    m.lastPoll = System.nanoTime();
    shared.computeIfAbsent(m.partition.index(), i -> new ArrayList<>(1)).add(m);
    return true;
  }

  private void detach(Member m) {
    m.sharing = false;
    List<Member> list = shared.get(m.partition.index());
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
      windowFloorKey = null;
    }
  }

  /** Hands a batch read by the shared cursor to the partitions' queues. Caller holds the lock. */
  private void distribute(List<ChangeEvent<D>> batch, Position at, boolean caughtUp, boolean ended,
      String endReason) {
    int count = -1;
    for (ChangeEvent<D> e : batch) {
      String key = sortKey.apply(e.position());
      if (e.key().isEmpty()) {
        for (List<Member> list : shared.values()) {
          list.forEach(m -> m.offer(e, key));
        }
      } else {
        if (count < 0) {
          count = anyPartitionCount();
        }
        List<Member> list = count < 0 ? null : shared.get(PartitionSpec.indexOf(e.key(), count));
        if (list != null) {
          list.forEach(m -> m.offer(e, key));
        }
      }
      if (windowSize > 0 && key != null) {
        window.addLast(new Keyed<>(e, key));
        if (window.size() > windowSize) {
          windowFloorKey = window.removeFirst().key;
        }
      } else {
        windowFloorKey = null; // a change whose place is unknown: the window cannot vouch for it
      }
    }
    upstreamPosition = at;
    String atKey = sortKey.apply(at);
    if (atKey == null) {
      windowFloorKey = null;
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
    for (List<Member> list : shared.values()) {
      if (!list.isEmpty()) {
        return list.get(0).partition.count();
      }
    }
    return -1;
  }

  /** The shared cursor failed: tell the partitions reading through it. Caller holds the lock. */
  private void failed(RuntimeException e) {
    boolean lost = e instanceof HistoryLostException;
    for (Member m : List.copyOf(members)) {
      if (!m.sharing) {
        continue;
      }
      detach(m);
      if (lost && m.floorKey.compareTo(upstreamKey) > 0) {
        continue; // ahead of what was lost: reads on a cursor of its own from its position
      }
      m.failure = e;
    }
    closeUpstream();
  }

  /** Wakes the partition that has waited longest, to read the next batch. Caller holds the lock. */
  private void wakeNextReader() {
    if (!waiting.isEmpty()) {
      waiting.iterator().next().signal();
    }
  }

  private record Keyed<D>(ChangeEvent<D> event, String key) {}

  /** One partition's cursor. Used by one thread, like any cursor. */
  private final class Member implements FeedCursor<D> {
    final PartitionSpec partition;
    final ArrayDeque<ChangeEvent<D>> queue = new ArrayDeque<>();
    final Condition ready = lock.newCondition();
    /** Where the partition stands: the last change returned, or the shared cursor's progress. */
    Position floor;
    String floorKey;
    /** Ahead of the shared cursor: its changes up to this key were handled already. */
    String skipThrough;
    boolean sharing;
    long lastPoll;
    /** A cursor of its own while it cannot read through the shared one. */
    FeedCursor<D> own;
    RuntimeException failure;
    boolean caughtUp;
    boolean ended;
    String endReason;
    boolean closed;
    /** Run instead of waiting in a poll (FeedCursor#wakeInsteadOfWaiting), or null. */
    Runnable wake;
    /** Whether its next poll waits for one of the engine's threads; never for a cursor that waits itself. */
    BooleanSupplier waitingForThread = () -> false;
    /** In {@link #waiting} without a thread: {@link #wake} runs when it may poll again. */
    boolean parked;

    Member(PartitionSpec partition, Position floor, String floorKey) {
      this.partition = partition;
      this.floor = floor;
      this.floorKey = floorKey;
    }

    void offer(ChangeEvent<D> e, String key) {
      if (skipThrough != null) {
        if (key != null && key.compareTo(skipThrough) <= 0) {
          return;
        }
        skipThrough = null;
      }
      queue.addLast(e);
    }

    @Override
    public List<ChangeEvent<D>> poll(Duration maxWait) {
      long deadline = System.nanoTime() + Math.max(0, maxWait.toNanos());
      lock.lock();
      try {
        if (closed) {
          throw new IllegalStateException("cursor of " + partition + " of " + stream + " is closed");
        }
        lastPoll = System.nanoTime();
        if (parked) {
          parked = false; // polled before its wake: no longer waiting
          waiting.remove(this);
        }
        while (true) {
          if (!queue.isEmpty()) {
            return take();
          }
          if (failure != null) {
            throw failure;
          }
          if (!sharing) {
            break;
          }
          if (upstreamEnded) {
            caughtUp = true;
            ended = true;
            endReason = upstreamEndReason;
            return List.of();
          }
          long remaining = deadline - System.nanoTime();
          if (reading) {
            if (remaining <= 0) {
              return advanced();
            }
            if (wake != null) {
              return park();
            }
            await(remaining);
            continue;
          }
          Member full = holdingBack();
          if (full != null) {
            long stalledFor = System.nanoTime() - full.lastPoll;
            if (stalledFor >= stallNanos && !full.waitingForThread.getAsBoolean()) {
              log.info("{} of {} has not taken a change for {} ms with {} queued: it reads on a cursor of its own"
                  + " from now on, so the other partitions of this process go on", full.partition, stream,
                  TimeUnit.NANOSECONDS.toMillis(stalledFor), full.queue.size());
              detach(full);
              continue;
            }
            if (remaining <= 0) {
              return advanced();
            }
            if (wake != null) {
              return park(); // polled again within the engine's poll wait, which re-checks the stall
            }
            long untilStalled = stallNanos - stalledFor; // <= 0: it waits for a thread, not stalled
            await(untilStalled > 0 ? Math.min(remaining, untilStalled) : remaining);
            continue;
          }
          readForAll(Duration.ofNanos(Math.max(0, remaining)));
          if (queue.isEmpty() && failure == null && deadline - System.nanoTime() <= 0) {
            return advanced();
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return List.of();
      } finally {
        lock.unlock();
      }
      return pollOwn(maxWait);
    }

    /** Reads the next batch on the shared cursor for every partition. Caller holds the lock. */
    private void readForAll(Duration wait) {
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
        List.copyOf(waiting).forEach(Member::signal);
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
      for (Member m : List.copyOf(waiting)) {
        if (!m.queue.isEmpty() || !m.sharing || upstreamEnded) {
          m.signal();
        } else if (!next) {
          next = true;
          m.signal();
        }
      }
    }

    /** Leaves the poll without waiting; {@link #signal} runs the wake. Caller holds the lock. */
    private List<ChangeEvent<D>> park() {
      parked = true;
      waiting.add(this);
      return advanced();
    }

    /** Lets the partition poll again: wakes its thread, or runs its wake if it parked. Caller holds the lock. */
    void signal() {
      if (wake == null) {
        ready.signal();
      } else if (parked) {
        parked = false;
        waiting.remove(this);
        wake.run();
      }
    }

    @Override
    public boolean wakeInsteadOfWaiting(Runnable wake, BooleanSupplier waitingForThread) {
      lock.lock();
      try {
        this.wake = Objects.requireNonNull(wake, "wake");
        this.waitingForThread = Objects.requireNonNull(waitingForThread, "waitingForThread");
        return true;
      } finally {
        lock.unlock();
      }
    }

    @Override
    public boolean parked() {
      lock.lock();
      try {
        return parked;
      } finally {
        lock.unlock();
      }
    }

    /** Waits for a wake-up or the time. Caller holds the lock. */
    private void await(long nanos) throws InterruptedException {
      waiting.add(this);
      try {
        ready.awaitNanos(nanos);
      } finally {
        waiting.remove(this);
      }
    }

    /**
     * The partition that holds the shared cursor back, or null: one whose queue is full, or, when
     * the partitions' queues hold {@code totalLimit} changes together, the one with the most.
     */
    private Member holdingBack() {
      Member largest = null;
      int total = 0;
      for (List<Member> list : shared.values()) {
        for (Member m : list) {
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

    /** Up to a batch from the queue. Caller holds the lock. */
    private List<ChangeEvent<D>> take() {
      int n = Math.min(batchSize, queue.size());
      List<ChangeEvent<D>> out = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        out.add(queue.removeFirst());
      }
      ChangeEvent<D> last = out.get(n - 1);
      String key = sortKey.apply(last.position());
      floor = last.position();
      floorKey = key != null ? key : floorKey;
      caughtUp = false;
      if (queue.isEmpty()) {
        advanced();
      }
      if (!reading) {
        wakeNextReader(); // there may be room now for the next read
      }
      return out;
    }

    /**
     * Nothing queued: everything the shared cursor read up to its position that is this
     * partition's was returned, so the partition stands there too. Caller holds the lock.
     */
    private List<ChangeEvent<D>> advanced() {
      if (sharing && queue.isEmpty() && upstreamKey != null && upstreamKey.compareTo(floorKey) > 0
          && skipThrough == null) {
        floor = upstreamPosition;
        floorKey = upstreamKey;
      }
      caughtUp = sharing && queue.isEmpty() && upstreamCaughtUp && skipThrough == null;
      return List.of();
    }

    /** Reads on its own cursor, and joins the shared one once it stands where that one can serve it. */
    private List<ChangeEvent<D>> pollOwn(Duration maxWait) {
      if (own == null) {
        own = opener.open(partition, floor);
      }
      List<ChangeEvent<D>> out = own.poll(maxWait);
      Position at = own.position();
      String key = sortKey.apply(at);
      floor = at;
      if (key == null) {
        return out; // a position the shared cursor cannot place: stays on its own
      }
      floorKey = key;
      caughtUp = own.caughtUp();
      ended = own.ended();
      if (ended) {
        endReason = own.endReason();
        return out;
      }
      if (!out.isEmpty() && !caughtUp) {
        return out; // still catching up
      }
      lock.lock();
      try {
        if (!closed && attach(this, true)) {
          FeedCursor<D> mine = own;
          own = null;
          mine.close();
        }
      } finally {
        lock.unlock();
      }
      return out;
    }

    @Override
    public Position position() {
      return floor;
    }

    @Override
    public boolean caughtUp() {
      return caughtUp;
    }

    @Override
    public boolean ended() {
      return ended && queue.isEmpty();
    }

    @Override
    public String endReason() {
      return endReason != null ? endReason : "the source ended the stream at " + floor;
    }

    @Override
    public void acknowledge(Position committed) {
      FeedCursor<D> mine = own;
      if (mine != null) {
        mine.acknowledge(committed);
      }
    }

    @Override
    public void close() {
      FeedCursor<D> mine;
      lock.lock();
      try {
        if (closed) {
          return;
        }
        closed = true;
        members.remove(this);
        waiting.remove(this);
        parked = false;
        if (sharing) {
          detach(this);
        }
        queue.clear();
        mine = own;
        own = null;
        wakeNextReader();
      } finally {
        lock.unlock();
      }
      if (mine != null) {
        mine.close();
      }
    }

    @Override
    public String toString() {
      return partition + " of " + stream + (sharing ? " (shared reader)" : " (own cursor)") + " at " + floor;
    }
  }
}
