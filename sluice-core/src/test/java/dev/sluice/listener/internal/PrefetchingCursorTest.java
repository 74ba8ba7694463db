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
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * The read-ahead wrapper (ADR 0074) against a scripted cursor: the engine sees the cursor's state
 * as of the batch it was handed, never of the read running ahead; acknowledgements reach the
 * cursor on the reader thread; a failed read is thrown in its turn and nothing is read after it.
 */
class PrefetchingCursorTest {

  /** A cursor whose polls return scripted batches (or throw), recording which threads used it. */
  private static final class Scripted implements FeedCursor<String> {
    final Deque<Object> script = new ArrayDeque<>();
    final Set<String> threads = ConcurrentHashMap.newKeySet();
    final List<Position> acknowledged = new CopyOnWriteArrayList<>();
    volatile int polls;
    volatile boolean closed;
    private Position position = Position.of("start");
    private boolean ended;

    @Override
    public synchronized List<ChangeEvent<String>> poll(Duration maxWait) {
      threads.add(Thread.currentThread().getName());
      polls++;
      Object next = script.poll();
      if (next == null) {
        return List.of();
      }
      if (next instanceof RuntimeException e) {
        throw e;
      }
      if (next.equals("END")) {
        ended = true;
        return List.of();
      }
      List<ChangeEvent<String>> batch = new ArrayList<>();
      for (String v : ((String) next).split(",")) {
        position = Position.of(v);
        batch.add(new ChangeEvent<>(v, "s", position, Operation.INSERT, v, v, v, null, null));
      }
      return batch;
    }

    @Override
    public synchronized Position position() {
      return position;
    }

    @Override
    public synchronized boolean ended() {
      return ended;
    }

    @Override
    public void acknowledge(Position committed) {
      threads.add(Thread.currentThread().getName());
      acknowledged.add(committed);
    }

    @Override
    public void close() {
      closed = true;
    }
  }

  private static List<String> values(List<ChangeEvent<String>> batch) {
    return batch.stream().map(ChangeEvent::document).toList();
  }

  @Test
  void theEngineSeesThePositionOfTheBatchItWasHandedNotOfTheReadAhead() {
    Scripted s = new Scripted();
    s.script.addAll(List.of("a,b", "c", "d,e"));
    PrefetchingCursor<String> c = new PrefetchingCursor<>(s, Duration.ofMillis(10), "t");
    assertThat(c.position()).isEqualTo(Position.of("start"));

    assertThat(values(c.poll(Duration.ofSeconds(5)))).containsExactly("a", "b");
    await().atMost(Duration.ofSeconds(5)).until(() -> s.polls >= 2); // "c" was read ahead
    assertThat(c.position()).as("not c's").isEqualTo(Position.of("b"));

    assertThat(values(c.poll(Duration.ofSeconds(5)))).containsExactly("c");
    assertThat(c.position()).isEqualTo(Position.of("c"));
    assertThat(values(c.poll(Duration.ofSeconds(5)))).containsExactly("d", "e");
    c.close();
    assertThat(s.closed).isTrue();
    assertThat(s.threads).containsExactly("sluice-read/t");
  }

  @Test
  void acknowledgementsReachTheCursorOnTheReaderThreadBeforeItsNextRead() {
    Scripted s = new Scripted();
    s.script.addAll(List.of("a", "b"));
    PrefetchingCursor<String> c = new PrefetchingCursor<>(s, Duration.ofMillis(10), "t");
    c.poll(Duration.ofSeconds(5));
    await().atMost(Duration.ofSeconds(5)).until(() -> s.polls >= 2); // "b" read ahead
    c.acknowledge(Position.of("a"));
    assertThat(s.acknowledged).as("the read ahead began before it").isEmpty();
    assertThat(values(c.poll(Duration.ofSeconds(5)))).containsExactly("b"); // starts the next read
    await().atMost(Duration.ofSeconds(5)).until(() -> s.acknowledged.contains(Position.of("a")));
    c.close();
    assertThat(s.threads).containsExactly("sluice-read/t");
  }

  @Test
  void aFailedReadIsThrownInItsTurnAndNothingIsReadAfterIt() {
    Scripted s = new Scripted();
    FeedException failure = new FeedException("getMore failed", null, true);
    s.script.addAll(List.of("a", failure, "never"));
    PrefetchingCursor<String> c = new PrefetchingCursor<>(s, Duration.ofMillis(10), "t");

    assertThat(values(c.poll(Duration.ofSeconds(5)))).containsExactly("a");
    assertThatThrownBy(() -> c.poll(Duration.ofSeconds(5))).isSameAs(failure);
    assertThatThrownBy(() -> c.poll(Duration.ofSeconds(5))).isSameAs(failure);
    assertThat(c.position()).isEqualTo(Position.of("a"));
    assertThat(s.polls).isEqualTo(2);
    c.close();
    assertThat(s.script).containsExactly("never");
  }

  @Test
  void theEndIsSeenAfterTheLastBatchAndNoReadFollowsIt() {
    Scripted s = new Scripted();
    s.script.addAll(List.of("a", "END", "never"));
    PrefetchingCursor<String> c = new PrefetchingCursor<>(s, Duration.ofMillis(10), "t");
    assertThat(values(c.poll(Duration.ofSeconds(5)))).containsExactly("a");
    assertThat(c.ended()).isFalse();
    assertThat(c.poll(Duration.ofSeconds(5))).isEmpty();
    assertThat(c.ended()).isTrue();
    assertThat(c.poll(Duration.ofSeconds(5))).isEmpty();
    c.close();
    assertThat(s.script).containsExactly("never");
  }
}
