package dev.sluice.kafka.connect;

import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A task's reading thread (ADR 0129). It reads the task's partitions in turn, turns their changes
 * into records and queues them, so that decoding the next batch overlaps Connect converting and
 * sending the one {@code poll} returned (Debezium reads on a thread of its own the same way). It
 * reads at most one pass ahead: it waits while the records queued and the next pass's would be
 * more than {@code capacity}, so a task holds at most twice what a pass reads. Every {@link
 * PartitionReader} is used by this thread only.
 *
 * <p>What it read is handed out by {@link #take} in the order it was read. A failure of the thread
 * (a policy that stops the task, a feed failed for good, an {@link Error}) is thrown by {@code take}
 * once the records read before it were handed out; the records of the pass that failed are not
 * handed out, so nothing after them is either, and a restarted task resumes after the last offset
 * Connect committed.
 */
final class ReadAhead implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ReadAhead.class);
  /** The longest a pass waits for a partition that does not wake the thread itself. */
  private static final long PASS_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  private static final Duration STOP_WAIT = Duration.ofSeconds(5);

  /** One pass over the task's partitions: reads into {@code out}, returns how many partitions waited. */
  interface Pass {
    /** Work done before each pass (confirming committed offsets). */
    void before();

    /** Reads each partition once into {@code out}, each waiting up to its share of {@code wait}. */
    void read(List<SourceRecord> out, Duration wait);

    /** How many partitions wait in a read (the others wake the thread when they have changes). */
    int waiting();
  }

  private final Pass pass;
  private final int capacity;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition queuedCondition = lock.newCondition();
  private final Condition roomCondition = lock.newCondition();
  private final Condition wakeCondition = lock.newCondition();
  private final ArrayDeque<List<SourceRecord>> batches = new ArrayDeque<>();
  private final Thread thread;
  private int queued;
  private boolean woken;
  private boolean closed;
  private Throwable failure;

  ReadAhead(String name, Pass pass, int capacity) {
    if (capacity < 1) {
      throw new IllegalArgumentException("capacity must be at least 1, was " + capacity);
    }
    this.pass = pass;
    this.capacity = capacity;
    this.thread = new Thread(this::run, name);
    thread.setDaemon(true);
  }

  void start() {
    thread.start();
  }

  /** Wakes the thread if it waits for changes: a partition that parks has some. */
  void wake() {
    lock.lock();
    try {
      woken = true;
      wakeCondition.signalAll();
    } finally {
      lock.unlock();
    }
  }

  private void run() {
    try {
      while (!isClosed()) {
        pass.before();
        int waiting = pass.waiting();
        List<SourceRecord> out = new ArrayList<>();
        pass.read(out, Duration.ofNanos(PASS_WAIT_NANOS / Math.max(1, waiting)));
        if (!out.isEmpty()) {
          queue(out);
        } else if (waiting == 0) {
          idle();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable t) { // handed to poll: the task fails with it
      lock.lock();
      try {
        if (!closed) {
          failure = t;
        }
        queuedCondition.signalAll();
      } finally {
        lock.unlock();
      }
    }
  }

  private boolean isClosed() {
    lock.lock();
    try {
      return closed;
    } finally {
      lock.unlock();
    }
  }

  /** Queues {@code out}, first waiting while it would take the queue beyond its capacity. */
  private void queue(List<SourceRecord> out) throws InterruptedException {
    lock.lock();
    try {
      while (!closed && queued > 0 && queued + out.size() > capacity) {
        roomCondition.await();
      }
      if (closed) {
        return;
      }
      batches.add(out);
      queued += out.size();
      queuedCondition.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** Nothing read and every partition wakes the thread: waits for a wake, at most a pass's wait. */
  private void idle() throws InterruptedException {
    lock.lock();
    try {
      if (!woken && !closed) {
        wakeCondition.awaitNanos(PASS_WAIT_NANOS);
      }
      woken = false;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Every record queued, in order, waiting up to {@code maxWait} for the first; null when none came.
   *
   * @throws ConnectException when the thread failed and everything it queued before was taken
   */
  List<SourceRecord> take(Duration maxWait) throws InterruptedException {
    lock.lock();
    try {
      long nanos = maxWait.toNanos();
      while (batches.isEmpty() && failure == null && !closed && nanos > 0) {
        nanos = queuedCondition.awaitNanos(nanos);
      }
      if (batches.isEmpty()) {
        if (failure != null) {
          throw failure instanceof ConnectException c ? c
              : new ConnectException("The task's reading thread failed: " + failure, failure);
        }
        return null;
      }
      List<SourceRecord> out = batches.size() == 1 ? batches.poll() : new ArrayList<>(queued);
      while (!batches.isEmpty()) {
        out.addAll(batches.poll());
      }
      queued = 0;
      roomCondition.signalAll();
      return out;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Stops the thread and waits for it to finish its pass (up to 5 s, then it is left to end once the
   * caller closed the partitions under it). Records still queued are dropped: they were never handed
   * to Connect, so their offsets were not committed.
   */
  @Override
  public void close() {
    lock.lock();
    try {
      closed = true;
      batches.clear();
      queued = 0;
      roomCondition.signalAll();
      queuedCondition.signalAll();
      wakeCondition.signalAll();
    } finally {
      lock.unlock();
    }
    if (thread.isAlive() && Thread.currentThread() != thread) {
      try {
        thread.join(STOP_WAIT.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (thread.isAlive()) {
        log.warn("The reading thread {} did not finish its pass within {}; closing its partitions under it",
            thread.getName(), STOP_WAIT);
      }
    }
  }
}
