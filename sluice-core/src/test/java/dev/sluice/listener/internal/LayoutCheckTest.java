package dev.sluice.listener.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.lease.StubLeaseStore;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerConfig;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The layout check as a group commit: partitions that acquired while a list was in flight share the
 * next one; none takes an answer from a list that started before it held its lease.
 */
class LayoutCheckTest {
  private final AtomicInteger lists = new AtomicInteger();
  private volatile CountDownLatch gate = new CountDownLatch(0);
  private volatile List<LeaseRecord> records = List.of();
  private volatile RuntimeException failNext;

  private final LeaseStore store = new StubLeaseStore() {
    @Override
    public List<LeaseRecord> list(String prefix) {
      lists.incrementAndGet();
      try {
        gate.await(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      RuntimeException f = failNext;
      if (f != null) {
        failNext = null;
        throw f;
      }
      return records;
    }

    @Override
    public Instant now() {
      return Instant.now();
    }
  };

  private final ChangeFeed<String> feed = new ChangeFeed<>() {
    @Override
    public String stream() {
      return "s";
    }

    @Override
    public FeedCursor<String> open(PartitionSpec partition, StartPoint start) {
      throw new UnsupportedOperationException();
    }
  };

  private final ListenerConfig<String> config =
      Listener.builder(feed, store).group("g").partitions(4).handler((c, f) -> { }).build().config();

  @Test
  void partitionsThatAcquiredDuringAListShareTheNextOne() throws Exception {
    LayoutCheck check = new LayoutCheck(config);
    gate = new CountDownLatch(1);
    List<String> answers = new CopyOnWriteArrayList<>();
    Thread first = new Thread(() -> answers.add(String.valueOf(check.conflictSince(System.nanoTime()))));
    first.start();
    await().atMost(Duration.ofSeconds(10)).until(() -> lists.get() == 1); // in flight
    List<Thread> later = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      long heldSince = System.nanoTime(); // after the list in flight started
      Thread t = new Thread(() -> answers.add(String.valueOf(check.conflictSince(heldSince))));
      later.add(t);
      t.start();
    }
    gate.countDown();
    first.join(10_000);
    for (Thread t : later) {
      t.join(10_000);
    }
    assertThat(answers).hasSize(21).containsOnly("null");
    assertThat(lists).as("one list for the first, one shared by the twenty that came while it ran").hasValue(2);

    // A partition that holds its lease after the last list started gets a list of its own.
    assertThat(check.conflictSince(System.nanoTime())).isNull();
    assertThat(lists).hasValue(3);
  }

  @Test
  void aConflictIsReportedAndAFailedListIsMadeAgainByTheNextCaller() {
    LayoutCheck check = new LayoutCheck(config);
    failNext = new LeaseStoreException("store down", true, null);
    assertThatThrownBy(() -> check.conflictSince(System.nanoTime())).hasMessageContaining("store down");
    Instant now = Instant.now();
    records = List.of(new LeaseRecord(config.partitionPrefix() + "0of8", "peer", 1, now.plusSeconds(10), null, now));
    assertThat(check.conflictSince(System.nanoTime()))
        .contains("already has partition records for 8 partitions").contains("configured with 4");
  }
}
