package dev.sluice.feed.fanout;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One partition's cursor on a {@link SharedReader}: through the shared cursor while it can, else on
 * a cursor of its own until it catches up. Used by one thread, like any cursor; its state is
 * changed under the reader's lock, by itself or when the reader tells it ({@link #share}, {@link
 * #unshare}, {@link #fail}).
 *
 * @param <D> the feed's document type
 */
final class SharedMember<D> implements FeedCursor<D> {
  private static final Logger log = LoggerFactory.getLogger(SharedReader.class); // the reader's log, as before the split

  private final SharedReader<D> reader;
  final PartitionSpec partition;
  /** Changes the shared cursor read for this partition, not yet returned. */
  final ArrayDeque<ChangeEvent<D>> queue = new ArrayDeque<>();
  private final Condition ready;
  /** Where the partition stands: the last change returned, or the shared cursor's progress. */
  private Position floor;
  private String floorKey;
  /** Ahead of the shared cursor: its changes up to this key were handled already. */
  private String skipThrough;
  /** Whether it reads through the shared cursor. */
  private boolean sharing;
  /** When it last polled (System.nanoTime). */
  private long lastPoll;
  /** A cursor of its own while it cannot read through the shared one. */
  private FeedCursor<D> own;
  private RuntimeException failure;
  private boolean caughtUp;
  private boolean ended;
  private String endReason;
  private boolean closed;
  /** Run instead of waiting in a poll (FeedCursor#wakeInsteadOfWaiting), or null. */
  private Runnable wake;
  /** Whether its next poll waits for one of the engine's threads; never for a cursor that waits itself. */
  private BooleanSupplier waitingForThread = () -> false;
  /** In the reader's waiting set without a thread: {@link #wake} runs when it may poll again. */
  private boolean parked;

  SharedMember(SharedReader<D> reader, PartitionSpec partition, Position floor, String floorKey) {
    this.reader = reader;
    this.ready = reader.lock.newCondition();
    this.partition = partition;
    this.floor = floor;
    this.floorKey = floorKey;
  }

  /** Where the partition stands, and that place as a sort key. Caller holds the lock. */
  Position floor() {
    return floor;
  }

  String floorKey() {
    return floorKey;
  }

  boolean sharing() {
    return sharing;
  }

  /**
   * Reads through the shared cursor from now on: {@code missed}, the window's changes after its
   * floor, are queued first; {@code ahead}: it stands ahead of the shared cursor, whose changes up
   * to its floor are old to it. Caller holds the lock.
   */
  void share(List<ChangeEvent<D>> missed, boolean ahead) {
    queue.addAll(missed);
    if (ahead) {
      skipThrough = floorKey;
    }
    sharing = true;
    lastPoll = System.nanoTime();
  }

  /** No longer reads through the shared cursor: its next poll reads on a cursor of its own. Caller holds the lock. */
  void unshare() {
    sharing = false;
  }

  /** The shared cursor failed where this partition's next change was: its next poll reports it. Caller holds the lock. */
  void fail(RuntimeException e) {
    failure = e;
  }

  /** Starts on a cursor of its own (the shared one could not serve its start). */
  void ownCursor(FeedCursor<D> cursor) {
    own = cursor;
  }

  /** When it last polled, and whether that poll waits for one of the engine's threads: for stall checks. */
  long lastPoll() {
    return lastPoll;
  }

  boolean waitsForThread() {
    return waitingForThread.getAsBoolean();
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
    reader.lock.lock();
    try {
      if (closed) {
        throw new IllegalStateException("cursor of " + partition + " of " + reader.stream + " is closed");
      }
      lastPoll = System.nanoTime();
      if (parked) {
        parked = false; // polled before its wake: no longer waiting
        reader.removeWaiting(this);
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
        if (reader.upstreamEnded) {
          caughtUp = true;
          ended = true;
          endReason = reader.upstreamEndReason;
          return List.of();
        }
        long remaining = deadline - System.nanoTime();
        if (reader.reading) {
          if (remaining <= 0) {
            return advanced();
          }
          if (wake != null) {
            return park();
          }
          await(remaining);
          continue;
        }
        SharedMember<D> full = reader.holdingBack();
        if (full != null) {
          long stalledFor = System.nanoTime() - full.lastPoll();
          if (stalledFor >= reader.stallNanos && !full.waitsForThread()) {
            log.info("{} of {} has not taken a change for {} ms with {} queued: it reads on a cursor of its own"
                + " from now on, so the other partitions of this process go on", full.partition, reader.stream,
                TimeUnit.NANOSECONDS.toMillis(stalledFor), full.queue.size());
            reader.detach(full);
            continue;
          }
          if (remaining <= 0) {
            return advanced();
          }
          if (wake != null) {
            return park(); // polled again within the engine's poll wait, which re-checks the stall
          }
          long untilStalled = reader.stallNanos - stalledFor; // <= 0: it waits for a thread, not stalled
          await(untilStalled > 0 ? Math.min(remaining, untilStalled) : remaining);
          continue;
        }
        reader.readForAll(Duration.ofNanos(Math.max(0, remaining)));
        if (queue.isEmpty() && failure == null && deadline - System.nanoTime() <= 0) {
          return advanced();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return List.of();
    } finally {
      reader.lock.unlock();
    }
    return pollOwn(maxWait);
  }

  /** Leaves the poll without waiting; {@link #signal} runs the wake. Caller holds the reader's lock. */
  private List<ChangeEvent<D>> park() {
    parked = true;
    reader.addWaiting(this);
    return advanced();
  }

  /** Lets the partition poll again: wakes its thread, or runs its wake if it parked. Caller holds the reader's lock. */
  void signal() {
    if (wake == null) {
      ready.signal();
    } else if (parked) {
      parked = false;
      reader.removeWaiting(this);
      wake.run();
    }
  }

  @Override
  public boolean wakeInsteadOfWaiting(Runnable wake, BooleanSupplier waitingForThread) {
    reader.lock.lock();
    try {
      this.wake = Objects.requireNonNull(wake, "wake");
      this.waitingForThread = Objects.requireNonNull(waitingForThread, "waitingForThread");
      return true;
    } finally {
      reader.lock.unlock();
    }
  }

  @Override
  public boolean parked() {
    reader.lock.lock();
    try {
      return parked;
    } finally {
      reader.lock.unlock();
    }
  }

  /** Waits for a wake-up or the time. Caller holds the reader's lock. */
  private void await(long nanos) throws InterruptedException {
    reader.addWaiting(this);
    try {
      ready.awaitNanos(nanos);
    } finally {
      reader.removeWaiting(this);
    }
  }

  /** Up to a batch from the queue. Caller holds the reader's lock. */
  private List<ChangeEvent<D>> take() {
    int n = Math.min(reader.batchSize, queue.size());
    List<ChangeEvent<D>> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      out.add(queue.removeFirst());
    }
    ChangeEvent<D> last = out.get(n - 1);
    String key = reader.sortKey.apply(last.position());
    floor = last.position();
    floorKey = key != null ? key : floorKey;
    caughtUp = false;
    if (queue.isEmpty()) {
      advanced();
    }
    if (!reader.reading) {
      reader.wakeNextReader(); // there may be room now for the next read
    }
    return out;
  }

  /**
   * Nothing queued: everything the shared cursor read up to its position that is this
   * partition's was returned, so the partition stands there too. Caller holds the reader's lock.
   */
  private List<ChangeEvent<D>> advanced() {
    if (sharing && queue.isEmpty() && reader.upstreamKey != null && reader.upstreamKey.compareTo(floorKey) > 0
        && skipThrough == null) {
      floor = reader.upstreamPosition;
      floorKey = reader.upstreamKey;
    }
    caughtUp = sharing && queue.isEmpty() && reader.upstreamCaughtUp && skipThrough == null;
    return List.of();
  }

  /** Reads on its own cursor, and joins the shared one once it stands where that one can serve it. */
  private List<ChangeEvent<D>> pollOwn(Duration maxWait) {
    if (own == null) {
      own = reader.opener.open(partition, floor);
    }
    List<ChangeEvent<D>> out = own.poll(maxWait);
    Position at = own.position();
    String key = reader.sortKey.apply(at);
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
    reader.lock.lock();
    try {
      if (!closed && reader.attach(this, true)) {
        FeedCursor<D> mine = own;
        own = null;
        mine.close();
      }
    } finally {
      reader.lock.unlock();
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
    reader.lock.lock();
    try {
      if (closed) {
        return;
      }
      closed = true;
      reader.removeMember(this);
      reader.removeWaiting(this);
      parked = false;
      if (sharing) {
        reader.detach(this);
      }
      queue.clear();
      mine = own;
      own = null;
      reader.wakeNextReader();
    } finally {
      reader.lock.unlock();
    }
    if (mine != null) {
      mine.close();
    }
  }

  @Override
  public String toString() {
    return partition + " of " + reader.stream + (sharing ? " (shared reader)" : " (own cursor)") + " at " + floor;
  }
}
