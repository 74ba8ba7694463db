package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.client.MongoClient;
import com.mongodb.client.model.Filters;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** MongoDB-specific lease behaviour on the embedded server. */
class MongoLeaseStoreTest {

  private static EmbeddedMongo mongo;
  private static MongoClient client;
  private static int dbCounter;

  @BeforeAll
  static void start() {
    mongo = EmbeddedMongo.start();
    client = mongo.client();
  }

  @AfterAll
  static void stop() {
    client.close();
    mongo.close();
  }

  private static MongoLeaseStore newStore() {
    return MongoLeaseStore.builder(client.getDatabase("leases" + (++dbCounter))).build();
  }

  @Test
  void acquireRenewCommitRelease() {
    MongoLeaseStore store = newStore();
    Lease a = store.tryAcquire("s#0", "a", Duration.ofSeconds(30)).orElseThrow();
    assertThat(a.owner()).isEqualTo("a");
    assertThat(a.checkpoint()).isNull();
    assertThat(a.expiresAt()).isAfter(store.now().plusSeconds(25));

    assertThat(store.tryAcquire("s#0", "b", Duration.ofSeconds(30))).isEmpty();
    assertThat(store.tryAcquire("s#0", "a", Duration.ofSeconds(30)))
        .as("re-acquiring a live lease, even by its owner, is not allowed")
        .isEmpty();

    Lease renewed = store.renew(a, Duration.ofSeconds(60));
    assertThat(renewed.epoch()).isEqualTo(a.epoch());
    assertThat(renewed.expiresAt()).isAfter(a.expiresAt());

    Position p = new Position("{\"resumeAfter\": 1}", Instant.parse("2024-01-01T00:00:00Z"));
    Lease committed = store.commit(renewed, p);
    assertThat(committed.checkpoint()).isEqualTo(p);

    assertThat(store.release(committed)).isTrue();
    assertThat(store.release(committed)).as("second release does nothing").isFalse();
    LeaseRecord rec = store.read("s#0").orElseThrow();
    assertThat(rec.owner()).isNull();
    assertThat(rec.isHeld()).isFalse();
    assertThat(rec.epoch()).isEqualTo(a.epoch());
    assertThat(rec.checkpoint()).isEqualTo(p);

    Lease b = store.tryAcquire("s#0", "b", Duration.ofSeconds(30)).orElseThrow();
    assertThat(b.epoch()).isGreaterThan(a.epoch());
    assertThat(b.checkpoint()).as("release keeps the checkpoint").isEqualTo(p);
  }

  @Test
  void expiredLeaseIsTakenOverWithHigherEpochAndStaleHolderIsFenced() {
    MongoLeaseStore store = newStore();
    Lease a = store.tryAcquire("x", "a", Duration.ofMillis(200)).orElseThrow();
    Instant expiry = a.expiresAt();
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(5))
        .until(() -> store.now().isAfter(expiry));
    Lease b = store.tryAcquire("x", "b", Duration.ofSeconds(30)).orElseThrow();
    assertThat(b.epoch()).isEqualTo(a.epoch() + 1);

    assertThatThrownBy(() -> store.renew(a, Duration.ofSeconds(30)))
        .isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("'x'");
    assertThatThrownBy(() -> store.commit(a, Position.of("stale")))
        .isInstanceOf(LeaseLostException.class);
    assertThat(store.release(a)).isFalse();
    assertThat(store.read("x").orElseThrow().owner()).isEqualTo("b");
    assertThat(store.read("x").orElseThrow().checkpoint()).isNull();
  }

  @Test
  void sameOwnerReacquiringAfterExpiryGetsNewEpochAndOldIncarnationIsFenced() {
    MongoLeaseStore store = newStore();
    Lease first = store.tryAcquire("y", "a", Duration.ofMillis(100)).orElseThrow();
    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(5))
        .until(() -> store.now().isAfter(first.expiresAt()));
    Lease second = store.tryAcquire("y", "a", Duration.ofSeconds(30)).orElseThrow();
    assertThat(second.epoch()).isGreaterThan(first.epoch());
    assertThatThrownBy(() -> store.commit(first, Position.of("old")))
        .isInstanceOf(LeaseLostException.class);
    store.commit(second, Position.of("new"));
  }

  @Test
  void concurrentFirstAcquisitionHasExactlyOneWinnerAndLosersGetEmpty() throws Exception {
    MongoLeaseStore store = newStore();
    int threads = 8;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      for (int round = 0; round < 20; round++) {
        String name = "race-" + round;
        CountDownLatch go = new CountDownLatch(1);
        List<Future<Optional<Lease>>> results = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
          String owner = "o" + t;
          Callable<Optional<Lease>> c =
              () -> {
                go.await();
                return store.tryAcquire(name, owner, Duration.ofSeconds(30));
              };
          results.add(pool.submit(c));
        }
        go.countDown();
        int winners = 0;
        for (Future<Optional<Lease>> f : results) {
          if (f.get().isPresent()) {
            winners++;
          }
        }
        assertThat(winners).as("round %d", round).isEqualTo(1);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void epochsKeepIncreasingAfterTheDocumentIsDeleted() {
    MongoLeaseStore store = newStore();
    long last = 0;
    for (int i = 0; i < 5; i++) {
      Lease l = store.tryAcquire("lock", "a", Duration.ofSeconds(30)).orElseThrow();
      assertThat(l.epoch()).isGreaterThan(last);
      last = l.epoch();
      store.release(l);
    }
    // What the optional TTL clean-up does on a real server.
    client
        .getDatabase(dbName(store))
        .getCollection(store.collectionName())
        .deleteOne(Filters.eq("_id", "lock"));
    Lease recreated = store.tryAcquire("lock", "a", Duration.ofSeconds(30)).orElseThrow();
    assertThat(recreated.epoch()).isGreaterThan(last);
  }

  @Test
  void listReturnsRecordsByPrefixInNameOrder() {
    MongoLeaseStore store = newStore();
    store.tryAcquire("s#1", "a", Duration.ofSeconds(30)).orElseThrow();
    store.tryAcquire("s#0", "b", Duration.ofSeconds(30)).orElseThrow();
    store.tryAcquire("s.x#0", "c", Duration.ofSeconds(30)).orElseThrow();
    store.tryAcquire("t#0", "d", Duration.ofSeconds(30)).orElseThrow();
    assertThat(store.list("s#")).extracting(LeaseRecord::name).containsExactly("s#0", "s#1");
    assertThat(store.list("s.")).extracting(LeaseRecord::name).containsExactly("s.x#0");
    assertThat(store.list("")).hasSize(4);
    assertThat(store.read("nope")).isEmpty();
  }

  @Test
  void serverClockIsUsedNotTheProcessClock() {
    // A database an hour ahead of and one an hour behind this process: both must behave as if
    // the clocks agreed, since expiry is judged entirely on the server's clock.
    for (Duration skew : List.of(Duration.ofHours(1), Duration.ofHours(-1))) {
      try (EmbeddedMongo skewed = EmbeddedMongo.start(Clock.offset(Clock.systemUTC(), skew));
          MongoClient c = skewed.client()) {
        LeaseStore store = MongoLeaseStore.builder(c.getDatabase("skew")).build();
        Instant processNow = Instant.now();
        assertThat(Duration.between(processNow, store.now()).minus(skew).abs())
            .isLessThan(Duration.ofSeconds(5));

        Lease live = store.tryAcquire("l", "a", Duration.ofSeconds(30)).orElseThrow();
        assertThat(Duration.between(processNow, live.expiresAt()).minus(skew))
            .isBetween(Duration.ofSeconds(25), Duration.ofSeconds(35));
        assertThat(store.tryAcquire("l", "b", Duration.ofSeconds(30)))
            .as("a live lease is not stolen with skew %s", skew)
            .isEmpty();

        Lease shortLease = store.tryAcquire("m", "a", Duration.ofMillis(300)).orElseThrow();
        org.awaitility.Awaitility.await()
            .atMost(Duration.ofSeconds(5))
            .until(() -> store.now().isAfter(shortLease.expiresAt()));
        Lease taken = store.tryAcquire("m", "b", Duration.ofSeconds(30)).orElseThrow();
        assertThat(taken.epoch()).isGreaterThan(shortLease.epoch());
        assertThatThrownBy(() -> store.renew(shortLease, Duration.ofSeconds(30)))
            .as("an expired lease is not kept with skew %s", skew)
            .isInstanceOf(LeaseLostException.class);
      }
    }
  }

  @Test
  void builderRejectsBadConfigurationNamingTheParameter() {
    var db = client.getDatabase("cfg");
    assertThatThrownBy(() -> MongoLeaseStore.builder(null))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("database");
    assertThatThrownBy(() -> MongoLeaseStore.builder(db).collection(" "))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("collection");
    assertThatThrownBy(() -> MongoLeaseStore.builder(db).expireUnusedAfter(Duration.ofSeconds(1)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("expireUnusedAfter");
    MongoLeaseStore store = MongoLeaseStore.builder(db).build();
    assertThatThrownBy(() -> store.tryAcquire("n", "o", Duration.ZERO))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("duration");
  }

  @Test
  void documentShapeIsReadableByOperators() {
    MongoLeaseStore store = newStore();
    Lease l = store.tryAcquire("doc", "me", Duration.ofSeconds(30)).orElseThrow();
    store.commit(l, new Position("tok", Instant.parse("2024-05-01T10:00:00Z")));
    Document d =
        client.getDatabase(dbName(store)).getCollection("sluice_leases").find().first();
    assertThat(d.getString("owner")).isEqualTo("me");
    assertThat(d.getLong("epoch")).isEqualTo(l.epoch());
    assertThat(d.get("checkpoint", Document.class).getString("token")).isEqualTo("tok");
  }

  private static String dbName(MongoLeaseStore store) {
    return "leases" + dbCounter;
  }
}
