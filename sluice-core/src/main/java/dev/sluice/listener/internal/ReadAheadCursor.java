package dev.sluice.listener.internal;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A partition's cursor read on a thread of its own, one batch ahead of the partition's worker
 * (ADR 0130): while the worker hands batch N to the handler and checkpoints it, this thread reads
 * and decodes batch N+1 from the source. The engine wraps the cursors of a feed whose cursors do
 * not wake it instead of waiting ({@code ChangeFeed#cursorsPark} false; a shared reader's do); the
 * wrapper does, so no pool thread waits in a source's poll either.
 *
 * <p>One thread uses the wrapped cursor, this one: its polls, and the acknowledgements the worker
 * asks for (applied before the next poll). What a poll gave is handed out whole and in order with
 * what the cursor said after it (position, caught up, ended, side failure), so {@link #position}
 * and the others describe the last batch the worker took, never one still queued. A failure of a
 * poll is handed out in its turn, after the batches read before it, and the thread stops there:
 * the worker re-opens the feed at its checkpoint as it would after the same failure unwrapped.
 */
final class ReadAheadCursor<D> implements FeedCursor<D> {
  private static final Logger log = LoggerFactory.getLogger(ReadAheadCursor.class);

  /** What one poll of the wrapped cursor gave, and what the cursor said after it. */
  private record Read<D>(List<ChangeEvent<D>> changes, Position position, boolean caughtUp, boolean ended,
      String endReason, String sideFailure, Throwable failure) {}

  private final FeedCursor<D> source;
  private final Duration pollWait;
  private final Runnable wake;
  private final Thread thread;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition room = lock.newCondition();
  private final Condition ready = lock.newCondition();
  private final Condition callEnded = lock.newCondition();
  /** At most one read waits here: the thread reads the next only when the worker took it. */
  private final ArrayDeque<Read<D>> queue = new ArrayDeque<>();
  private Position pendingAck;
  private boolean parked;
  private boolean closed;
  /** The thread ended (closed, the stream's end, or a failure handed). */
  private boolean finished;
  /** The thread is in a call of the wrapped cursor: whoever ends that call after a close closes it. */
  private boolean busy;
  private boolean sourceClosed;
  /** The last read handed to the worker (written and read by the worker's turns). */
  private volatile Read<D> taken;
  /** Whether the worker took a read yet (its turns only). */
  private boolean tookOne;

  private ReadAheadCursor(FeedCursor<D> source, String name, Duration pollWait, Runnable wake) {
    this.source = source;
    this.pollWait = pollWait;
    this.wake = wake;
    this.taken = new Read<>(List.of(), source.position(), false, false, null, null, null);
    this.thread = new Thread(this::run, "sluice-read-" + name);
    thread.setDaemon(true);
  }

  /**
   * {@code source}, read ahead on a thread named after {@code name} with polls of up to {@code
   * pollWait}, running {@code wake} when a read is ready after a poll found none.
   */
  static <D> ReadAheadCursor<D> start(FeedCursor<D> source, String name, Duration pollWait, Runnable wake) {
    ReadAheadCursor<D> c = new ReadAheadCursor<>(source, name, pollWait, wake);
    c.thread.start();
    return c;
  }

  private void run() {
    Read<D> last = null; // the first read is handed even when empty: it says the source answered
    try {
      while (true) {
        Position ack;
        lock.lock();
        try {
          while (!closed && !queue.isEmpty() && pendingAck == null) {
            room.await();
          }
          if (closed) {
            return;
          }
          ack = pendingAck;
          pendingAck = null;
          busy = true;
        } finally {
          lock.unlock();
        }
        if (ack != null) {
          if (acknowledgeAndEndCall(ack)) {
            return; // closed meanwhile
          }
          continue; // then wait for room again, or read
        }
        Read<D> read = null;
        Throwable failed = null;
        try {
          List<ChangeEvent<D>> polled = source.poll(pollWait);
          boolean end = source.ended();
          read = new Read<>(polled, source.position(), source.caughtUp(), end,
              end ? source.endReason() : null, source.sideFailure(), null);
        } catch (Throwable t) {
          failed = t;
        }
        if (notBusy()) {
          return; // closed meanwhile: what was read is dropped, as close drops the queue
        }
        if (failed != null) {
          throw failed;
        }
        List<ChangeEvent<D>> changes = read.changes();
        boolean ended = read.ended();
        if (last != null && changes.isEmpty() && !ended && Objects.equals(read.position(), last.position())
            && read.caughtUp() == last.caughtUp() && Objects.equals(read.sideFailure(), last.sideFailure())) {
          continue; // nothing the worker would see
        }
        hand(read);
        last = read;
        if (ended) {
          return;
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Throwable t) { // handed to the worker in its turn, as an unwrapped poll would throw it
      Read<D> before = last != null ? last : taken;
      hand(new Read<>(List.of(), before.position(), false, false, null, before.sideFailure(), t));
    } finally {
      lock.lock();
      try {
        finished = true;
        ready.signalAll();
      } finally {
        lock.unlock();
      }
      // Those that came while the thread was ending, or during its last call: passed on here.
      for (Position ack = takeAckForCall(); ack != null; ack = takeAckForCall()) {
        if (acknowledgeAndEndCall(ack)) {
          break; // closed meanwhile
        }
      }
    }
  }

  /**
   * Once the thread has ended: the acknowledgement waiting for it, now a call of this thread's
   * (marked busy), or null. One that waits while the worker is in a call of its own is older than
   * that call's (the worker acknowledges in order) and is dropped.
   */
  private Position takeAckForCall() {
    lock.lock();
    try {
      Position ack = closed || busy ? null : pendingAck;
      pendingAck = null;
      busy |= ack != null;
      return ack;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Passes {@code ack} to the wrapped cursor in a call marked busy, then ends the call as {@link
   * #notBusy} does; a failed acknowledgement is only logged, as the worker treats one: the next
   * acknowledgement says it again.
   */
  private boolean acknowledgeAndEndCall(Position ack) {
    boolean closedMeanwhile;
    try {
      source.acknowledge(ack);
    } catch (RuntimeException e) {
      log.debug("{}: acknowledging {} failed: {}", thread.getName(), ack, e.toString());
    } finally {
      closedMeanwhile = notBusy(); // an Error passes on, but the call still ends
    }
    return closedMeanwhile;
  }

  /**
   * Ends a call of the wrapped cursor; returns true (after closing the cursor) when {@link #close}
   * came during it.
   */
  private boolean notBusy() {
    lock.lock();
    try {
      busy = false;
      if (!closed || sourceClosed) {
        return closed;
      }
      sourceClosed = true;
    } finally {
      lock.unlock();
    }
    try {
      source.close();
    } finally {
      lock.lock();
      try {
        callEnded.signalAll();
      } finally {
        lock.unlock();
      }
    }
    return true;
  }

  private void hand(Read<D> read) {
    boolean wakeNow;
    lock.lock();
    try {
      if (closed) {
        return;
      }
      queue.add(read);
      ready.signalAll();
      wakeNow = parked;
      parked = false;
    } finally {
      lock.unlock();
    }
    if (wakeNow) {
      wake.run();
    }
  }

  /**
   * The next read, without waiting: empty (and {@link #parked}) when the thread has none ready. The
   * first poll waits for the first read (however long the source takes to answer, as an unwrapped
   * cursor's first poll would), so that a poll that returns normally always means that the source
   * answered since the cursor opened: the worker counts it as a read that succeeded.
   */
  @Override
  public List<ChangeEvent<D>> poll(Duration maxWait) {
    Read<D> read;
    lock.lock();
    try {
      while (!tookOne && queue.isEmpty() && !closed && !finished) {
        ready.awaitUninterruptibly();
      }
      read = queue.poll();
      if (read == null) {
        parked = !closed;
        return List.of();
      }
      room.signalAll();
    } finally {
      lock.unlock();
    }
    tookOne = true;
    Throwable failure = read.failure();
    if (failure != null) {
      if (failure instanceof RuntimeException r) {
        throw r;
      }
      throw (Error) failure; // a poll throws nothing checked
    }
    taken = read;
    return read.changes();
  }

  @Override
  public Position position() {
    return taken.position();
  }

  @Override
  public boolean caughtUp() {
    return taken.caughtUp();
  }

  @Override
  public boolean ended() {
    return taken.ended();
  }

  @Override
  public String endReason() {
    String reason = taken.endReason();
    return reason != null ? reason : FeedCursor.super.endReason();
  }

  @Override
  public String sideFailure() {
    return taken.sideFailure();
  }

  /**
   * Applied by the reading thread before its next poll; a later acknowledgement replaces one not yet
   * applied. Once the thread has ended (the stream's end, or a failure handed), the caller applies it
   * itself, unless the thread is still in a last call, which then passes it on: the wrapped cursor is
   * never in two calls at once, the caller never waits for the thread, and the acknowledgement of
   * what was committed after the last read still reaches the source (a PostgreSQL slot's confirmed
   * position).
   */
  @Override
  public void acknowledge(Position committed) {
    lock.lock();
    try {
      if (closed) {
        return;
      }
      if (!finished || busy) { // a thread in a call (also on its way out) passes it on after that call
        pendingAck = committed;
        room.signalAll();
        return;
      }
      busy = true; // a close meanwhile waits for this call, and the source is closed when it returns
    } finally {
      lock.unlock();
    }
    acknowledgeAndEndCall(committed);
  }

  /** Always: the wake was given at {@link #start}, and {@link #poll} waits for nothing but the first read. */
  @Override
  public boolean wakeInsteadOfWaiting(Runnable wake, BooleanSupplier waitingForThread) {
    return true;
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

  /**
   * Stops the thread, drops what it read ahead, and closes the wrapped cursor: at once when the
   * thread is not in a call of it; else the thread closes it when that call returns, and this
   * waits for that up to {@code pollWait} and a second (a poll returns within its wait, so a
   * PostgreSQL slot is free when this returns), no longer: a read that does not return (a server
   * that stopped answering) does not hold a listener's close or its hand-over (ADR 0019).
   */
  @Override
  public void close() {
    boolean closeNow = false;
    lock.lock();
    try {
      closed = true;
      parked = false;
      queue.clear();
      room.signalAll();
      ready.signalAll();
      closeNow = !busy && !sourceClosed;
      sourceClosed |= closeNow;
      if (!closeNow && Thread.currentThread() != thread) {
        long nanos = pollWait.plusSeconds(1).toNanos();
        while (busy && nanos > 0) {
          nanos = callEnded.awaitNanos(nanos);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      lock.unlock();
    }
    if (closeNow) {
      source.close();
    }
  }
}
