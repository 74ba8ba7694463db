package dev.sluice.feed.fanout;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.listener.InMemoryFeed;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The shared reader against the engine's reference feed: each partition sees exactly its changes,
 * in order, whatever the order in which partitions join, stall, fail or end, and the stream is read
 * once.
 */
class SharedReaderTest {
  private static final Duration POLL = Duration.ofMillis(20);

  /** Two partitions of two, for the tests that need no more. */
  private static final PartitionSpec A = new PartitionSpec(0, 2);
  private static final PartitionSpec B = new PartitionSpec(1, 2);

  private final InMemoryFeed feed = new InMemoryFeed("s");
  private final AtomicInteger sharedOpens = new AtomicInteger();
  private final AtomicInteger ownOpens = new AtomicInteger();

  private SharedReader<String> reader(int batch, int queue, int window, Duration stall) {
    return reader(batch, queue, 1_000_000, window, stall);
  }

  private SharedReader<String> reader(int batch, int queue, int total, int window, Duration stall) {
    return new SharedReader<>("s", (spec, after) -> {
      (spec.count() == 1 ? sharedOpens : ownOpens).incrementAndGet();
      return feed.open(spec, StartPoint.after(after));
    }, p -> String.format("%010d", Long.parseLong(p.token())), batch, queue, total, window, stall);
  }

  private void append(int from, int to) {
    for (int i = from; i < to; i++) {
      feed.append("k" + (i % 61), "v" + i);
    }
  }

  /** The values of changes {@code from} (offset) to {@code to} that partition {@code p} owns. */
  private static List<String> expected(PartitionSpec p, int from, int to) {
    List<String> out = new ArrayList<>();
    for (int i = from; i < to; i++) {
      if (p.owns("k" + (i % 61))) {
        out.add("v" + i);
      }
    }
    return out;
  }

  private static List<String> drain(FeedCursor<String> cursor, int count) {
    List<String> got = new ArrayList<>();
    await().atMost(Duration.ofSeconds(20)).pollDelay(Duration.ZERO).pollInterval(Duration.ofMillis(1)).until(() -> {
      cursor.poll(POLL).forEach(e -> got.add(e.document()));
      return got.size() >= count;
    });
    return got;
  }

  private final List<List<String>> got = new ArrayList<>();

  /**
   * Each of the eight cursors polls on a thread of its own, as partitions do, until it has its
   * share of the changes before {@code to}; partition 0 starts with {@code already}.
   */
  private List<Thread> readOnThreads(List<FeedCursor<String>> cursors, int to, List<String> already) {
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < cursors.size(); i++) {
      List<String> mine = new CopyOnWriteArrayList<>(i == 0 ? already : List.of());
      got.add(mine);
      FeedCursor<String> c = cursors.get(i);
      int count = expected(new PartitionSpec(i, cursors.size()), 0, to).size();
      Thread t = new Thread(() -> {
        while (mine.size() < count && !Thread.currentThread().isInterrupted()) {
          c.poll(POLL).forEach(e -> mine.add(e.document()));
        }
      });
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }
    return threads;
  }

  /** Waits for {@link #readOnThreads} and checks that each partition got exactly its changes, in order. */
  private void joinAndCheck(List<Thread> threads, int to) throws InterruptedException {
    for (Thread t : threads) {
      t.join(20_000);
      assertThat(t.isAlive()).as("reader thread finished").isFalse();
    }
    for (int i = 0; i < threads.size(); i++) {
      assertThat(got.get(i)).as("partition " + i).isEqualTo(expected(new PartitionSpec(i, threads.size()), 0, to));
    }
  }

  private static Position at(int offset) {
    return Position.of(Integer.toString(offset));
  }

  @Test
  void eightPartitionsEachGetExactlyTheirChangesInOrderFromOneCursor() throws Exception {
    SharedReader<String> reader = reader(100, 400, 1000, Duration.ofSeconds(30));
    append(0, 1000);
    List<FeedCursor<String>> cursors = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      cursors.add(reader.join(new PartitionSpec(i, 8), at(0)));
    }
    List<Thread> threads = readOnThreads(cursors, 3000, List.of());
    append(1000, 3000); // while they read
    joinAndCheck(threads, 3000);
    assertThat(sharedOpens).hasValue(1);
    assertThat(ownOpens).hasValue(0);
    // Caught up and nothing of theirs queued: each stands at the end of the stream.
    cursors.forEach(c -> c.poll(Duration.ZERO));
    assertThat(cursors).allSatisfy(c -> assertThat(c.position().token()).isEqualTo("3000"));
  }

  @Test
  void aPartitionFarBehindReadsOnItsOwnUntilItCatchesUpThenJoins() {
    SharedReader<String> reader = reader(10, 40, 10, Duration.ofSeconds(30));
    append(0, 500);
    FeedCursor<String> ca = reader.join(A, at(0));
    assertThat(drain(ca, expected(A, 0, 500).size())).isEqualTo(expected(A, 0, 500));

    FeedCursor<String> cb = reader.join(B, at(0));
    assertThat(ownOpens).hasValue(1);
    assertThat(drain(cb, expected(B, 0, 500).size())).isEqualTo(expected(B, 0, 500));
    await().atMost(Duration.ofSeconds(10)).until(() -> {
      cb.poll(POLL);
      return reader.readers()[0] == 2;
    });

    append(500, 600);
    assertThat(drain(ca, expected(A, 500, 600).size())).isEqualTo(expected(A, 500, 600));
    assertThat(drain(cb, expected(B, 500, 600).size())).isEqualTo(expected(B, 500, 600));
    assertThat(sharedOpens).hasValue(1);
  }

  @Test
  void aPartitionJoiningWithinTheWindowIsServedFromIt() {
    SharedReader<String> reader = reader(10, 40, 100, Duration.ofSeconds(30));
    append(0, 500);
    FeedCursor<String> ca = reader.join(A, at(0));
    drain(ca, expected(A, 0, 500).size());

    FeedCursor<String> cb = reader.join(B, at(450));
    assertThat(drain(cb, expected(B, 450, 500).size())).isEqualTo(expected(B, 450, 500));
    assertThat(ownOpens).hasValue(0);
    assertThat(sharedOpens).hasValue(1);
  }

  @Test
  void aPartitionAheadOfTheSharedCursorGetsNothingItHadAlready() {
    // Queues large enough for one partition to be drained before the other.
    SharedReader<String> reader = reader(10, 400, 100, Duration.ofSeconds(30));
    append(0, 400);
    FeedCursor<String> ca = reader.join(A, at(0));
    FeedCursor<String> cb = reader.join(B, at(300)); // committed further before a restart
    List<String> gotB = drain(cb, expected(B, 300, 400).size());
    assertThat(gotB).isEqualTo(expected(B, 300, 400));
    assertThat(drain(ca, expected(A, 0, 400).size())).isEqualTo(expected(A, 0, 400));
    assertThat(ownOpens).hasValue(0);
  }

  @Test
  void anIdlePartitionStandsWhereTheSharedCursorStands() {
    SharedReader<String> reader = reader(10, 40, 100, Duration.ofSeconds(30));
    FeedCursor<String> ca = reader.join(A, at(0));
    FeedCursor<String> cb = reader.join(B, at(0));
    String keyOfA = "x";
    while (!A.owns(keyOfA)) {
      keyOfA = keyOfA + "x";
    }
    for (int i = 0; i < 30; i++) {
      feed.append(keyOfA, "v" + i);
    }
    assertThat(drain(ca, 30)).hasSize(30);
    await().atMost(Duration.ofSeconds(10)).until(() -> cb.poll(POLL).isEmpty() && cb.position().token().equals("30"));
  }

  @Test
  void aStalledPartitionIsMovedToItsOwnCursorAndTheOthersGoOn() {
    SharedReader<String> reader = reader(10, 20, 10, Duration.ofMillis(200));
    append(0, 1000);
    FeedCursor<String> ca = reader.join(A, at(0)); // never polls until the end
    FeedCursor<String> cb = reader.join(B, at(0));
    assertThat(drain(cb, expected(B, 0, 1000).size())).isEqualTo(expected(B, 0, 1000));
    assertThat(reader.readers()).containsExactly(1, 1);

    assertThat(drain(ca, expected(A, 0, 1000).size())).isEqualTo(expected(A, 0, 1000));
    assertThat(ownOpens).hasValue(1);
  }

  /**
   * A partition whose next poll only waits for one of the engine's threads (behind other
   * partitions' work) is slow, not stalled: it keeps the shared cursor, holding the others back,
   * until it is truly not polling.
   */
  @Test
  void aPartitionWaitingForAThreadIsNotMovedToItsOwnCursor() {
    Duration stall = Duration.ofMillis(200);
    SharedReader<String> reader = reader(10, 20, 10, stall);
    append(0, 1000);
    FeedCursor<String> ca = reader.join(A, at(0)); // never polls until the end
    FeedCursor<String> cb = reader.join(B, at(0));
    java.util.concurrent.atomic.AtomicBoolean aWaitsForAThread = new java.util.concurrent.atomic.AtomicBoolean(true);
    assertThat(ca.wakeInsteadOfWaiting(() -> { }, aWaitsForAThread::get)).isTrue();
    List<String> gotB = new ArrayList<>();
    long until = System.nanoTime() + stall.multipliedBy(3).toNanos();
    while (System.nanoTime() < until) {
      gotB.addAll(values(cb.poll(POLL)));
    }
    assertThat(reader.readers()).containsExactly(2, 0);
    assertThat(gotB.size()).isLessThan(expected(B, 0, 1000).size());

    aWaitsForAThread.set(false); // now it is not polling although it could
    gotB.addAll(drain(cb, expected(B, 0, 1000).size() - gotB.size()));
    assertThat(gotB).isEqualTo(expected(B, 0, 1000));
    assertThat(reader.readers()).containsExactly(1, 1);
    assertThat(drain(ca, expected(A, 0, 1000).size())).isEqualTo(expected(A, 0, 1000));
  }

  @Test
  void whatIsQueuedForAllPartitionsTogetherStaysBoundedWhateverTheirCount() throws Exception {
    SharedReader<String> reader = reader(10, 40, 60, 10, Duration.ofSeconds(30));
    append(0, 2000);
    List<FeedCursor<String>> cursors = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      cursors.add(reader.join(new PartitionSpec(i, 8), at(0)));
    }
    // Only partition 0 polls: the others take nothing for now (a slow handler each).
    List<String> first = new ArrayList<>();
    for (int n = 0; n < 50; n++) {
      cursors.get(0).poll(Duration.ZERO).forEach(e -> first.add(e.document()));
      // At most one read (InMemoryFeed: 50 changes) past the limit.
      assertThat(reader.queued()).isLessThanOrEqualTo(60 + 50);
    }
    // Then all take their changes, each on its thread, as partitions do.
    joinAndCheck(readOnThreads(cursors, 2000, first), 2000);
    assertThat(ownOpens).hasValue(0);
  }

  @Test
  void aFailureOfTheSharedCursorReachesEveryPartitionAfterItsQueuedChangesAndThenTheyResume() {
    SharedReader<String> reader = reader(100, 400, 100, Duration.ofSeconds(30));
    append(0, 200);
    FeedCursor<String> ca = reader.join(A, at(0));
    FeedCursor<String> cb = reader.join(B, at(0));
    List<String> gotA = new ArrayList<>(values(ca.poll(POLL))); // reads 50 for both
    feed.failNextPolls(1);
    assertThatThrownBy(() -> {
      while (true) {
        gotA.addAll(values(ca.poll(POLL)));
      }
    }).isInstanceOf(FeedException.class).hasMessageContaining("injected");
    List<String> gotB = new ArrayList<>();
    assertThatThrownBy(() -> {
      while (true) {
        gotB.addAll(values(cb.poll(POLL)));
      }
    }).isInstanceOf(FeedException.class);
    assertThat(gotB).isEqualTo(expected(B, 0, 50)); // what was read before the failure first

    // As the engine does: close, open again where it stands.
    Position pa = ca.position();
    Position pb = cb.position();
    ca.close();
    cb.close();
    FeedCursor<String> ra = reader.join(A, pa);
    FeedCursor<String> rb = reader.join(B, pb);
    gotA.addAll(drain(ra, expected(A, 0, 200).size() - gotA.size()));
    gotB.addAll(drain(rb, expected(B, 0, 200).size() - gotB.size()));
    assertThat(gotA).isEqualTo(expected(A, 0, 200));
    assertThat(gotB).isEqualTo(expected(B, 0, 200));
  }

  @Test
  void historyLossGoesOnlyToThePartitionsWhoseNextChangeItLost() {
    SharedReader<String> reader = reader(10, 40, 100, Duration.ofSeconds(30));
    PartitionSpec p0 = new PartitionSpec(0, 3);
    PartitionSpec p1 = new PartitionSpec(1, 3);
    PartitionSpec p2 = new PartitionSpec(2, 3);
    append(0, 100);
    FeedCursor<String> ca = reader.join(p0, at(0));
    FeedCursor<String> cb = reader.join(p1, at(0));
    FeedCursor<String> cc = reader.join(p2, at(80)); // ahead: its history is still there
    feed.trimBefore(50);
    assertThatThrownBy(() -> ca.poll(POLL)).isInstanceOf(HistoryLostException.class);
    assertThatThrownBy(() -> cb.poll(POLL)).isInstanceOf(HistoryLostException.class);
    assertThat(drain(cc, expected(p2, 80, 100).size())).isEqualTo(expected(p2, 80, 100));
    // A partition starting before the retained history is told so at once.
    assertThatThrownBy(() -> reader.join(p0, at(10))).isInstanceOf(HistoryLostException.class);
  }

  @Test
  void theEndOfTheStreamReachesEveryPartitionAfterItsChanges() {
    SharedReader<String> reader = reader(10, 400, 100, Duration.ofSeconds(30));
    append(0, 120);
    feed.end();
    FeedCursor<String> ca = reader.join(A, at(0));
    FeedCursor<String> cb = reader.join(B, at(0));
    assertThat(drain(ca, expected(A, 0, 120).size())).isEqualTo(expected(A, 0, 120));
    assertThat(drain(cb, expected(B, 0, 120).size())).isEqualTo(expected(B, 0, 120));
    await().atMost(Duration.ofSeconds(10)).until(() -> {
      ca.poll(POLL);
      cb.poll(POLL);
      return ca.ended() && cb.ended();
    });
  }

  @Test
  void theSharedCursorIsClosedWithItsLastPartitionAndOpenedAgainForTheNext() {
    SharedReader<String> reader = reader(10, 40, 100, Duration.ofSeconds(30));
    append(0, 50);
    FeedCursor<String> ca = reader.join(A, at(0));
    List<String> first = drain(ca, expected(A, 0, 50).size());
    Position p = ca.position();
    ca.close();
    assertThat(reader.readers()).containsExactly(0, 0);
    append(50, 100);
    FeedCursor<String> again = reader.join(A, p);
    first.addAll(drain(again, expected(A, 50, 100).size()));
    assertThat(first).isEqualTo(expected(A, 0, 100));
    assertThat(sharedOpens).hasValue(2);
  }

  @Test
  void aPartitionOfAnotherCountReadsOnItsOwnCursor() {
    SharedReader<String> reader = reader(10, 400, 100, Duration.ofSeconds(30));
    append(0, 100);
    FeedCursor<String> ca = reader.join(A, at(0));
    PartitionSpec ofThree = new PartitionSpec(0, 3);
    FeedCursor<String> other = reader.join(ofThree, at(0));
    assertThat(ownOpens).hasValue(1);
    assertThat(drain(other, expected(ofThree, 0, 100).size())).isEqualTo(expected(ofThree, 0, 100));
    assertThat(drain(ca, expected(A, 0, 100).size())).isEqualTo(expected(A, 0, 100));
  }

  /** What a read of the shared cursor does, given that cursor on the feed: a test's interposition. */
  @FunctionalInterface
  private interface SharedRead {
    List<ChangeEvent<String>> poll(FeedCursor<String> cursor, Duration maxWait);
  }

  /** A reader whose shared cursor reads through {@code read}; partitions' own cursors as they are. */
  private SharedReader<String> readerReading(SharedRead read) {
    return new SharedReader<String>("s", (spec, after) -> {
      FeedCursor<String> c = feed.open(spec, StartPoint.after(after));
      if (spec.count() != 1) {
        return c;
      }
      return new FeedCursor<String>() {
        @Override
        public List<ChangeEvent<String>> poll(Duration maxWait) {
          return read.poll(c, maxWait);
        }

        @Override
        public Position position() {
          return c.position();
        }

        @Override
        public void close() {
          c.close();
        }
      };
    }, p -> String.format("%010d", Long.parseLong(p.token())), 10, 400, 1_000_000, 100, Duration.ofSeconds(30));
  }

  /** A reader whose shared cursor counts down {@code reading} each time a read of it starts. */
  private SharedReader<String> readerSignalling(CountDownLatch reading) {
    return readerReading((c, maxWait) -> {
      reading.countDown();
      return c.poll(maxWait);
    });
  }

  private static String keyOf(PartitionSpec p) {
    for (int i = 0; ; i++) {
      if (p.owns("key" + i)) {
        return "key" + i;
      }
    }
  }

  /** B parked while A reads for both on a thread of its own (A's poll waits up to 2 s for a change). */
  private record ParkedWhileAReads(FeedCursor<String> cb, CountDownLatch woken, Thread a, List<String> gotA) {}

  private ParkedWhileAReads parkBWhileAReads() throws InterruptedException {
    CountDownLatch reading = new CountDownLatch(1);
    SharedReader<String> reader = readerSignalling(reading);
    FeedCursor<String> ca = reader.join(A, at(0));
    FeedCursor<String> cb = reader.join(B, at(0));
    CountDownLatch woken = new CountDownLatch(1);
    assertThat(cb.wakeInsteadOfWaiting(woken::countDown, () -> false)).isTrue();
    List<String> gotA = new CopyOnWriteArrayList<>();
    Thread a = new Thread(() -> gotA.addAll(values(ca.poll(Duration.ofSeconds(2)))));
    a.start();
    assertThat(reading.await(10, TimeUnit.SECONDS)).isTrue(); // A reads for both, waiting for a change
    assertThat(cb.poll(Duration.ofSeconds(30))).isEmpty();
    assertThat(cb.parked()).isTrue();
    assertThat(woken.getCount()).isEqualTo(1);
    return new ParkedWhileAReads(cb, woken, a, gotA);
  }

  /**
   * ADR 0075: a partition on a pool thread does not wait while another partition reads for it; it
   * parks, and its wake runs when the read brings it a change.
   */
  @Test
  void aPartitionThatParksIsWokenWhenAReadBringsItsChange() throws Exception {
    ParkedWhileAReads p = parkBWhileAReads();
    feed.append(keyOf(B), "b0");
    assertThat(p.woken().await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(p.cb().parked()).isFalse();
    assertThat(values(p.cb().poll(POLL))).containsExactly("b0");
    p.a().join(10_000);
    assertThat(p.a().isAlive()).isFalse();
  }

  /** A read that brought a parked partition nothing still wakes it: it may read the next batch. */
  @Test
  void aParkedPartitionIsWokenToReadTheNextBatch() throws Exception {
    ParkedWhileAReads p = parkBWhileAReads();
    FeedCursor<String> cb = p.cb();
    CountDownLatch woken = p.woken();
    Thread a = p.a();
    List<String> gotA = p.gotA();

    feed.append(keyOf(A), "a0");
    assertThat(woken.await(10, TimeUnit.SECONDS)).isTrue();
    a.join(10_000);
    assertThat(gotA).containsExactly("a0");
    assertThat(cb.poll(POLL)).isEmpty(); // reads for itself now; nothing of B's
    assertThat(cb.parked()).isFalse();
  }

  /**
   * An Error thrown by the shared cursor's read (a driver bug, an OutOfMemoryError) goes to the
   * partition that was reading, whose engine restarts it; the partitions parked meanwhile are woken
   * and read on, and lose nothing.
   */
  @Test
  void anErrorInASharedReadGoesToTheReadingPartitionAndTheParkedOnesReadOn() throws Exception {
    CountDownLatch reading = new CountDownLatch(1);
    CountDownLatch fail = new CountDownLatch(1);
    AtomicInteger reads = new AtomicInteger();
    SharedReader<String> reader = readerReading((c, maxWait) -> {
      if (reads.incrementAndGet() == 1) {
        reading.countDown();
        try {
          fail.await();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        throw new Error("driver bug while reading");
      }
      return c.poll(maxWait);
    });
    append(0, 20);
    FeedCursor<String> ca = reader.join(A, at(0));
    FeedCursor<String> cb = reader.join(B, at(0));
    CountDownLatch woken = new CountDownLatch(1);
    assertThat(cb.wakeInsteadOfWaiting(woken::countDown, () -> false)).isTrue();
    List<Throwable> thrownToA = new CopyOnWriteArrayList<>();
    Thread a = new Thread(() -> {
      try {
        ca.poll(Duration.ofSeconds(10));
      } catch (Error e) {
        thrownToA.add(e);
      }
    });
    a.start();
    assertThat(reading.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(cb.poll(POLL)).isEmpty();
    assertThat(cb.parked()).isTrue();

    fail.countDown();
    a.join(10_000);
    assertThat(thrownToA).singleElement().extracting(Throwable::getMessage).isEqualTo("driver bug while reading");
    assertThat(woken.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(drain(cb, expected(B, 0, 20).size())).isEqualTo(expected(B, 0, 20));
    // A's engine closes its cursor and opens it again at its checkpoint: nothing of A's is lost.
    ca.close();
    assertThat(drain(reader.join(A, at(0)), expected(A, 0, 20).size())).isEqualTo(expected(A, 0, 20));
  }

  private static List<String> values(List<ChangeEvent<String>> events) {
    return events.stream().map(ChangeEvent::document).toList();
  }
}
