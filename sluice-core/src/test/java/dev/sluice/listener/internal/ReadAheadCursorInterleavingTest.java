package dev.sluice.listener.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link ReadAheadCursor} under every interleaving a run can produce of its reading thread, the
 * worker's polls and acknowledgements (also after the thread ended: the stream's end or a
 * failure), and a close at any point: the wrapped cursor is never in two calls at once and never
 * called after its close, it is always closed in the end, the worker gets the batches in order and
 * none twice, and the acknowledgements reach the cursor in the order they were given. Each call of
 * the wrapped cursor takes a random time, to widen the windows between them.
 */
class ReadAheadCursorInterleavingTest {

  /** A cursor that records any call overlapping another, or coming after its close. */
  private static final class CheckingCursor implements FeedCursor<String> {
    final AtomicInteger inCall = new AtomicInteger();
    final List<String> violations = new CopyOnWriteArrayList<>();
    final List<Integer> acknowledged = new CopyOnWriteArrayList<>();
    final int batches;
    final boolean fails;
    final int callMicros;
    volatile boolean closed;
    private volatile int read;
    private volatile boolean ended;

    CheckingCursor(int batches, boolean fails, int callMicros) {
      this.batches = batches;
      this.fails = fails;
      this.callMicros = callMicros;
    }

    private void enter(String call) {
      if (inCall.incrementAndGet() != 1) {
        violations.add(call + " overlapped another call on thread " + Thread.currentThread().getName());
      }
      if (closed) {
        violations.add(call + " after close on thread " + Thread.currentThread().getName());
      }
      if (callMicros > 0) {
        // the call's own duration (a round trip), so that other threads' calls could meet it
        LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(ThreadLocalRandom.current().nextInt(callMicros + 1)));
      }
    }

    private void exit() {
      inCall.decrementAndGet();
    }

    @Override
    public List<ChangeEvent<String>> poll(Duration maxWait) {
      enter("poll");
      try {
        if (read < batches) {
          read++;
          String k = "k" + read;
          return List.of(new ChangeEvent<>(k, "s", Position.of(Integer.toString(read)), Operation.INSERT, k, k, k,
              null, null));
        }
        if (fails) {
          throw new FeedException("server gone after " + read + " batches", null, true);
        }
        ended = true;
        return List.of();
      } finally {
        exit();
      }
    }

    @Override
    public Position position() {
      enter("position");
      try {
        return Position.of(Integer.toString(read));
      } finally {
        exit();
      }
    }

    @Override
    public boolean ended() {
      enter("ended");
      try {
        return ended;
      } finally {
        exit();
      }
    }

    @Override
    public void acknowledge(Position committed) {
      enter("acknowledge");
      try {
        acknowledged.add(Integer.parseInt(committed.token()));
      } finally {
        exit();
      }
    }

    @Override
    public void close() {
      enter("close");
      try {
        closed = true;
      } finally {
        exit();
      }
    }
  }

  @Property(tries = 150)
  void theWrappedCursorIsUsedByOneThreadAtATimeClosedOnceAndHearsEveryAcknowledgementInOrder(
      @ForAll @IntRange(min = 0, max = 6) int batches,
      @ForAll boolean fails,
      @ForAll @IntRange(min = 0, max = 8) int closeAfterTaking,
      @ForAll boolean acknowledgeEach,
      @ForAll boolean acknowledgeAfterTheEnd,
      @ForAll @IntRange(min = 0, max = 2000) int callMicros) {
    CheckingCursor source = new CheckingCursor(batches, fails, callMicros);
    ReadAheadCursor<String> cursor = ReadAheadCursor.start(source, "interleaving", Duration.ofMillis(5), () -> { });
    List<Integer> taken = new ArrayList<>();
    boolean failed = false;
    try {
      await().atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(1)).until(() -> {
        for (ChangeEvent<String> e : cursor.poll(Duration.ZERO)) {
          taken.add(Integer.parseInt(e.position().token()));
          if (acknowledgeEach) {
            cursor.acknowledge(e.position());
          }
        }
        return cursor.ended() || taken.size() >= closeAfterTaking;
      });
    } catch (FeedException e) {
      failed = true;
      assertThat(fails).as("a failure only from a failing source").isTrue();
    }
    if (acknowledgeAfterTheEnd && !taken.isEmpty()) {
      cursor.acknowledge(Position.of(Integer.toString(taken.get(taken.size() - 1))));
    }
    cursor.close();
    cursor.acknowledge(Position.of("999")); // after close: must not reach the source
    await().atMost(Duration.ofSeconds(5)).until(() -> source.closed);

    assertThat(source.violations).as("calls of the wrapped cursor that overlapped or came after close").isEmpty();
    List<Integer> inOrder = new ArrayList<>();
    for (int i = 1; i <= taken.size(); i++) {
      inOrder.add(i);
    }
    assertThat(taken).as("batches taken in order, none twice").isEqualTo(inOrder);
    assertThat(source.acknowledged).as("acknowledgements in the order given").isSorted().doesNotContain(999);
    if (acknowledgeAfterTheEnd && !taken.isEmpty() && (failed || cursor.ended())) {
      // The thread had ended: the worker's acknowledgement is applied at once, before the close.
      assertThat(source.acknowledged).as("the acknowledgement after the thread ended")
          .contains(taken.get(taken.size() - 1));
    }
    if (!failed && cursor.ended()) {
      assertThat(taken).as("everything before the end").hasSize(batches);
    }
  }
}
