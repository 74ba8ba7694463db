package dev.sluice.mongodb.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoClient;
import dev.sluice.testkit.mongo.InMemoryMongo;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The inbox on the embedded MongoDB, or a real deployment given -Dsluice.mongodb.uri. */
class MongoInboxTest {
  private InMemoryMongo mongo;
  private MongoClient client;
  private String app;

  @BeforeEach
  void start() {
    mongo = new InMemoryMongo();
    client = mongo.client();
    app = mongo.freshDatabase().getName();
  }

  @AfterEach
  void stop() {
    mongo.close();
  }

  @Test
  void concurrentConsumersProcessEveryIdExactlyOnce() throws Exception {
    int consumers = 4;
    int ids = 300;
    // Every consumer receives every message (redelivery to competing consumers, worst case).
    Map<String, AtomicInteger> effects = new ConcurrentHashMap<>();
    AtomicInteger duplicates = new AtomicInteger();
    CountDownLatch go = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(consumers);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int c = 0; c < consumers; c++) {
        MongoInbox inbox =
            MongoInbox.builder(client.getDatabase(app), "inbox").instance("consumer-" + c).build();
        List<Integer> order = new ArrayList<>();
        for (int i = 0; i < ids; i++) {
          order.add(i);
        }
        Collections.shuffle(order, new java.util.Random(c));
        futures.add(pool.submit(() -> {
          go.await();
          for (int i : order) {
            String id = "evt-" + i;
            while (true) {
              try {
                if (!inbox.processIfNew(id, () -> effects.computeIfAbsent(id, k -> new AtomicInteger()).incrementAndGet())) {
                  duplicates.incrementAndGet();
                }
                break;
              } catch (ClaimedElsewhereException busy) {
                Thread.yield(); // another consumer is on it: the broker would redeliver later
              }
            }
          }
          return null;
        }));
      }
      go.countDown();
      for (Future<?> f : futures) {
        f.get(60, TimeUnit.SECONDS);
      }
    } finally {
      pool.shutdownNow();
    }
    assertThat(effects).hasSize(ids);
    assertThat(effects.values()).allSatisfy(n -> assertThat(n.get()).isEqualTo(1));
    assertThat(duplicates.get()).isEqualTo(ids * (consumers - 1));
  }

  @Test
  void failedWorkReleasesTheClaimSoARedeliveryRetries() {
    MongoInbox inbox = MongoInbox.create(client.getDatabase(app), "inbox");
    assertThatThrownBy(() -> inbox.processIfNew("e1", () -> { throw new IllegalStateException("db down"); }))
        .isInstanceOf(InboxWorkException.class)
        .hasMessageContaining("e1")
        .hasMessageContaining("db down");
    assertThat(inbox.processed("e1")).isFalse();
    AtomicInteger runs = new AtomicInteger();
    assertThat(inbox.processIfNew("e1", runs::incrementAndGet)).isTrue();
    assertThat(inbox.processIfNew("e1", runs::incrementAndGet)).isFalse();
    assertThat(runs).hasValue(1);
  }

  @Test
  void aClaimOfADeadConsumerExpiresAndIsTakenOver() {
    MutableClock clock = new MutableClock(Instant.parse("2026-01-01T00:00:00Z"));
    MongoInbox crashed =
        MongoInbox.builder(client.getDatabase(app), "inbox").instance("a").clock(clock)
            .claimTimeout(Duration.ofSeconds(30)).build();
    MongoInbox survivor =
        MongoInbox.builder(client.getDatabase(app), "inbox").instance("b").clock(clock)
            .claimTimeout(Duration.ofSeconds(30)).build();
    // "a" claims and dies inside its work: simulated by checking b's view from inside the work.
    crashed.processIfNew("e1", () -> {
      assertThatThrownBy(() -> survivor.processIfNew("e1", () -> {}))
          .isInstanceOf(ClaimedElsewhereException.class)
          .hasMessageContaining("consumer a");
      clock.advance(Duration.ofSeconds(31));
      AtomicInteger ran = new AtomicInteger();
      assertThat(survivor.processIfNew("e1", ran::incrementAndGet)).isTrue();
      assertThat(ran).hasValue(1);
    });
    assertThat(survivor.processed("e1")).isTrue();
  }

  @Test
  void purgeForgetsOldIds() {
    MutableClock clock = new MutableClock(Instant.parse("2026-01-01T00:00:00Z"));
    MongoInbox inbox =
        MongoInbox.builder(client.getDatabase(app), "inbox").clock(clock).retention(Duration.ofDays(7)).build();
    inbox.processIfNew("old", () -> {});
    clock.advance(Duration.ofDays(8));
    inbox.processIfNew("new", () -> {});
    assertThat(inbox.purgeProcessedBefore(clock.instant().minus(Duration.ofDays(7)))).isEqualTo(1);
    assertThat(inbox.processed("old")).isFalse();
    assertThat(inbox.processed("new")).isTrue();
  }

  static final class MutableClock extends Clock {
    private volatile Instant now;

    MutableClock(Instant now) {
      this.now = now;
    }

    void advance(Duration d) {
      now = now.plus(d);
    }

    @Override
    public Instant instant() {
      return now;
    }

    @Override
    public java.time.ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(java.time.ZoneId zone) {
      return this;
    }
  }
}
