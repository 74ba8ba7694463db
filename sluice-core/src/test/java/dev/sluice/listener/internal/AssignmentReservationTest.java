package dev.sluice.listener.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.Ticker;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Listener;
import dev.sluice.listener.ListenerConfig;
import java.lang.reflect.Proxy;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.junit.jupiter.api.Test;

/**
 * The partitions' workers of one member decide whether to acquire at the same moment: a place in
 * the quota is reserved by the decision, so two workers never both take the last one (the second
 * would have counted as an adopted orphan, never handed back: three members on four partitions
 * stayed at 2, 2 and 0).
 */
class AssignmentReservationTest {

  @Test
  void aPlaceInTheQuotaIsTakenByTheFirstWorkerToDecideAndFreedIfItsAttemptFails() {
    // The reservation rules never touch the feed or the store (only refresh() and workers do).
    ChangeFeed<String> feed = new ChangeFeed<>() {
      @Override
      public String stream() {
        return "orders";
      }

      @Override
      public FeedCursor<String> open(PartitionSpec partition, StartPoint start) {
        throw new UnsupportedOperationException("not used by this test");
      }
    };
    LeaseStore store = (LeaseStore) Proxy.newProxyInstance(LeaseStore.class.getClassLoader(),
        new Class<?>[] {LeaseStore.class}, (proxy, method, args) -> {
          throw new UnsupportedOperationException("not used by this test: " + method.getName());
        });
    ListenerConfig<String> config = Listener.builder(feed, store)
        .group("g").partitions(4).handler((e, f) -> { }).build().config();
    ScheduledExecutorService scheduler = Executors.newSingleThreadScheduledExecutor();
    try {
      Assignment a = new Assignment(config, scheduler, Ticker.system());
      a.quotaForTest(1);
      assertThat(a.reserve(2)).as("the first worker to decide").isTrue();
      assertThat(a.reserve(3)).as("no place left while the first attempt is under way").isFalse();
      a.unreserve(2); // its lease was taken by someone else
      assertThat(a.reserve(3)).isTrue();
      a.acquired(3);
      assertThat(a.reserve(2)).as("the quota is held").isFalse();
      assertThat(a.reserve(3)).as("a held partition may always be renewed").isTrue();
      a.released(3);
      assertThat(a.reserve(2)).isTrue();
    } finally {
      scheduler.shutdownNow();
    }
  }
}
