package dev.sluice.listener.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The engine's read-ahead (ADR 0130) over a cursor whose polls the test scripts: what the worker
 * sees is what an unwrapped cursor would have said, batch by batch, one batch ahead at most, with
 * acknowledgements and close on the reading thread. The listener's suites run it over every real
 * feed.
 */
class ReadAheadCursorTest {
  /** A step of the script: a batch (with the position after it), a failure, or the end. */
  private record Step(List<String> keys, String positionAfter, boolean caughtUp, RuntimeException failure,
      Error error, boolean end) {
    static Step batch(String positionAfter, String... keys) {
      return new Step(List.of(keys), positionAfter, false, null, null, false);
    }
  }

  /** A cursor that gives what the test puts in {@code steps}, one a poll; records who called it. */
  private static final class ScriptedCursor implements FeedCursor<String> {
    final BlockingQueue<Step> steps = new LinkedBlockingQueue<>();
    final AtomicInteger polls = new AtomicInteger();
    final List<String> acknowledged = new CopyOnWriteArrayList<>();
    final List<String> threads = new CopyOnWriteArrayList<>();
    volatile boolean closed;
    volatile CountDownLatch blockNextPoll;
    private volatile Position position = Position.of("start");
    private volatile boolean caughtUp;
    private volatile boolean ended;

    @Override
    public List<ChangeEvent<String>> poll(Duration maxWait) {
      threads.add(Thread.currentThread().getName());
      CountDownLatch block = blockNextPoll;
      if (block != null) {
        blockNextPoll = null;
        try {
          block.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      Step s;
      try {
        s = steps.poll(maxWait.toNanos(), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return List.of();
      }
      if (s == null) {
        return List.of();
      }
      polls.incrementAndGet();
      if (s.failure() != null) {
        throw s.failure();
      }
      if (s.error() != null) {
        throw s.error();
      }
      if (s.end()) {
        ended = true;
        return List.of();
      }
      List<ChangeEvent<String>> out = new ArrayList<>();
      for (String k : s.keys()) {
        out.add(new ChangeEvent<>(k, "s", Position.of(k), Operation.INSERT, k, k, k, null, null));
      }
      position = Position.of(s.positionAfter());
      caughtUp = s.caughtUp();
      return out;
    }

    @Override
    public Position position() {
      return position;
    }

    @Override
    public boolean caughtUp() {
      return caughtUp;
    }

    @Override
    public boolean ended() {
      return ended;
    }

    @Override
    public String endReason() {
      return "dropped";
    }

    @Override
    public void acknowledge(Position committed) {
      threads.add(Thread.currentThread().getName());
      acknowledged.add(committed.token());
    }

    @Override
    public void close() {
      closed = true;
    }
  }

  private final ScriptedCursor source = new ScriptedCursor();
  private final AtomicInteger wakes = new AtomicInteger();
  private ReadAheadCursor<String> cursor;

  private ReadAheadCursor<String> start() {
    cursor = ReadAheadCursor.start(source, "p0", Duration.ofMillis(20), wakes::incrementAndGet);
    return cursor;
  }

  @AfterEach
  void close() {
    if (cursor != null) {
      cursor.close();
    }
  }

  private Thread readingThread() {
    return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("sluice-read-p0"))
        .findFirst().orElse(new Thread(() -> { })); // not started: not alive
  }

  /** Polls as the worker does: until a batch comes (the read-ahead never waits in a poll). */
  private static List<String> next(FeedCursor<String> c) {
    List<String> keys = new ArrayList<>();
    await().atMost(Duration.ofSeconds(10)).until(() -> {
      for (ChangeEvent<String> e : c.poll(Duration.ofMillis(20))) {
        keys.add(e.key());
      }
      return !keys.isEmpty();
    });
    return keys;
  }

  @Test
  void eachBatchComesWithWhatTheCursorSaidAfterIt() {
    ReadAheadCursor<String> c = start();
    assertThat(c.position()).as("before any batch: where the cursor opened").isEqualTo(Position.of("start"));
    source.steps.add(Step.batch("p2", "a", "b"));
    source.steps.add(new Step(List.of("c"), "p3", true, null, null, false));

    assertThat(next(c)).containsExactly("a", "b");
    assertThat(c.position().token()).isEqualTo("p2");
    assertThat(c.caughtUp()).isFalse();
    assertThat(next(c)).containsExactly("c");
    assertThat(c.position().token()).isEqualTo("p3");
    assertThat(c.caughtUp()).isTrue();
    assertThat(source.threads).as("only the reading thread uses the cursor").allMatch(t -> t.equals("sluice-read-p0"));
  }

  @Test
  void readsOneBatchAheadAndNoMore() {
    ReadAheadCursor<String> c = start();
    for (int i = 0; i < 5; i++) {
      source.steps.add(Step.batch("p" + i, "k" + i));
    }
    // One batch queued for the worker, none read beyond it while the worker takes nothing: the
    // thread waits for room (WAITING; in a poll it would be TIMED_WAITING).
    await().atMost(Duration.ofSeconds(10)).until(() -> source.polls.get() == 1
        && readingThread().getState() == Thread.State.WAITING);
    assertThat(source.polls.get()).isEqualTo(1);
    assertThat(source.steps).hasSize(4);

    for (int i = 0; i < 5; i++) {
      assertThat(next(c)).containsExactly("k" + i);
    }
  }

  @Test
  void aPollThatFindsNothingParksAndTheNextBatchWakesTheWorkerOnce() {
    ReadAheadCursor<String> c = start();
    assertThat(c.wakeInsteadOfWaiting(() -> { }, () -> false)).isTrue();
    assertThat(c.poll(Duration.ofSeconds(5))).as("the first poll: the source answered, with nothing").isEmpty();
    assertThat(c.parked()).isFalse();
    assertThat(c.poll(Duration.ofSeconds(5))).as("later polls never wait").isEmpty();
    assertThat(c.parked()).isTrue();
    assertThat(wakes.get()).isZero();

    source.steps.add(Step.batch("p1", "a"));
    await().atMost(Duration.ofSeconds(10)).until(() -> wakes.get() == 1);
    assertThat(c.parked()).isFalse();
    assertThat(c.poll(Duration.ZERO)).extracting(ChangeEvent::key).containsExactly("a");
    source.steps.add(Step.batch("p2", "b"));
    assertThat(next(c)).containsExactly("b");
    assertThat(wakes.get()).as("no poll parked in between").isEqualTo(1);
  }

  @Test
  void aPositionThatMovesWithoutChangesReachesTheWorker() {
    ReadAheadCursor<String> c = start();
    source.steps.add(Step.batch("p1")); // an empty batch after which the position moved (other tables' WAL)
    await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
      assertThat(c.poll(Duration.ZERO)).isEmpty();
      assertThat(c.position().token()).isEqualTo("p1");
    });
  }

  @Test
  void acknowledgementsAreAppliedOnTheReadingThreadTheLatestWinning() {
    ReadAheadCursor<String> c = start();
    source.steps.add(Step.batch("p1", "a"));
    source.steps.add(Step.batch("p2", "b"));
    assertThat(next(c)).containsExactly("a");
    c.acknowledge(Position.of("a"));
    await().atMost(Duration.ofSeconds(10)).until(() -> source.acknowledged.contains("a"));
    assertThat(source.threads).allMatch(t -> t.equals("sluice-read-p0"));
    assertThat(next(c)).containsExactly("b");
  }

  @Test
  void aFailureIsThrownAfterTheBatchesReadBeforeItAndTheThreadStops() {
    ReadAheadCursor<String> c = start();
    source.steps.add(Step.batch("p1", "a"));
    source.steps.add(new Step(null, null, false, new FeedException("server gone", null, true), null, false));
    source.steps.add(Step.batch("p2", "never"));

    assertThat(next(c)).containsExactly("a");
    assertThatThrownBy(() -> next(c)).isInstanceOf(FeedException.class).hasMessage("server gone");
    assertThat(c.position().token()).as("the last batch taken").isEqualTo("p1");
    await().atMost(Duration.ofSeconds(10)).until(() -> !readingThread().isAlive());
    assertThat(source.steps).as("nothing read after the failure").hasSize(1);
  }

  @Test
  void anErrorIsThrownAsItself() {
    ReadAheadCursor<String> c = start();
    source.steps.add(new Step(null, null, false, null, new OutOfMemoryError("decoding a huge row"), false));
    assertThatThrownBy(() -> next(c)).isInstanceOf(OutOfMemoryError.class).hasMessage("decoding a huge row");
  }

  @Test
  void theFirstPollWaitsForTheSourcesFirstAnswerSoAFailingSourceIsNeverTakenForOneThatAnswered() {
    CountDownLatch release = new CountDownLatch(1);
    source.blockNextPoll = release; // a server that takes its time to refuse
    source.steps.add(new Step(null, null, false, new FeedException("connection refused", null, true), null, false));
    ReadAheadCursor<String> c = start();
    java.util.concurrent.atomic.AtomicReference<Throwable> thrown = new java.util.concurrent.atomic.AtomicReference<>();
    Thread worker = new Thread(() -> {
      try {
        c.poll(Duration.ofMillis(1));
      } catch (RuntimeException e) {
        thrown.set(e);
      }
    });
    worker.start();
    await().atMost(Duration.ofSeconds(10)).until(() -> worker.getState() == Thread.State.WAITING);
    release.countDown();
    await().atMost(Duration.ofSeconds(10)).until(() -> thrown.get() != null);
    assertThat(thrown.get()).hasMessage("connection refused");
    assertThat(c.poll(Duration.ZERO)).as("after the failure: nothing, without waiting").isEmpty();
  }

  @Test
  void theEndReachesTheWorkerAfterTheLastBatch() {
    ReadAheadCursor<String> c = start();
    source.steps.add(Step.batch("p1", "a"));
    source.steps.add(new Step(null, null, false, null, null, true));
    assertThat(next(c)).containsExactly("a");
    assertThat(c.ended()).as("not before the worker took the end").isFalse();
    await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
      assertThat(c.poll(Duration.ZERO)).isEmpty();
      assertThat(c.ended()).isTrue();
    });
    assertThat(c.endReason()).isEqualTo("dropped");
  }

  @Test
  void anAcknowledgementAfterTheThreadEndedStillReachesTheSourceAndNoneAfterClose() {
    ReadAheadCursor<String> c = start();
    source.steps.add(Step.batch("p1", "a"));
    source.steps.add(new Step(null, null, false, null, null, true));
    assertThat(next(c)).containsExactly("a");
    await().atMost(Duration.ofSeconds(10)).until(() -> !readingThread().isAlive());

    // The worker commits what it handled after the stream's end: the slot must still hear of it.
    c.acknowledge(Position.of("a"));
    assertThat(source.acknowledged).containsExactly("a");
    c.close();
    assertThat(source.closed).isTrue();
    c.acknowledge(Position.of("late"));
    assertThat(source.acknowledged).as("nothing reaches a closed source").containsExactly("a");
  }

  @Test
  void closeDoesNotWaitForAReadInFlightTheThreadClosesTheCursorWhenItReturns() {
    CountDownLatch release = new CountDownLatch(1);
    source.blockNextPoll = release; // a server that does not answer
    ReadAheadCursor<String> c = start();
    await().atMost(Duration.ofSeconds(10)).until(() -> !source.threads.isEmpty()); // in its first poll
    c.close(); // returns after pollWait and a second: a listener's close does not wait for it (ADR 0019)
    assertThat(source.closed).as("not under the poll in flight").isFalse();
    release.countDown();
    await().atMost(Duration.ofSeconds(10)).until(() -> source.closed && !readingThread().isAlive());
    assertThat(c.poll(Duration.ofSeconds(5))).as("a closed cursor hands out nothing, without waiting").isEmpty();
    cursor = null;
  }

  @Test
  void closeDuringAPollThatReturnsWaitsForItSoTheCursorIsClosedWhenCloseReturns() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    source.blockNextPoll = release;
    ReadAheadCursor<String> c = start();
    await().atMost(Duration.ofSeconds(10)).until(() -> !source.threads.isEmpty());
    Thread closer = new Thread(c::close);
    closer.start();
    await().atMost(Duration.ofSeconds(10)).until(() -> closer.getState() == Thread.State.TIMED_WAITING);
    release.countDown(); // the poll returns within close's wait
    closer.join(10_000);
    assertThat(closer.isAlive()).isFalse();
    assertThat(source.closed).as("closed by the time close returned (a PostgreSQL slot is free)").isTrue();
    cursor = null;
  }

  @Test
  void closeWhileTheThreadWaitsForRoomClosesTheCursorAtOnce() {
    ReadAheadCursor<String> c = start();
    source.steps.add(Step.batch("p1", "a"));
    await().atMost(Duration.ofSeconds(10)).until(() -> source.polls.get() == 1
        && readingThread().getState() == Thread.State.WAITING);
    c.close();
    assertThat(source.closed).isTrue();
    await().atMost(Duration.ofSeconds(10)).until(() -> !readingThread().isAlive());
    cursor = null;
  }

}
