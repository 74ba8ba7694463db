package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.bson.Document;
import org.bson.conversions.Bson;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The conformance suite plus MongoDB-specific behaviour, on the embedded server (or a real one,
 * see {@link #URI_PROPERTY}; names are unique per run, so a real database can be reused).
 */
class MongoLeaseStoreTest extends MongoLeaseStoreContract {

  private static EmbeddedMongo mongo;
  private static MongoClient client;
  private static MongoDatabase database;

  /**
   * Runs the suite against a real MongoDB instead of the embedded one when set, for example
   * {@code -Dsluice.mongodb.uri=mongodb://localhost:27017/?replicaSet=rs0}.
   */
  static final String URI_PROPERTY = "sluice.mongodb.uri";

  @BeforeAll
  static void start() {
    String uri = System.getProperty(URI_PROPERTY);
    if (uri == null || uri.isBlank()) {
      mongo = EmbeddedMongo.start();
      client = mongo.client();
    } else {
      client = com.mongodb.client.MongoClients.create(uri);
    }
    database = client.getDatabase("sluice_lease_tck");
  }

  @AfterAll
  static void stop() {
    client.close();
    if (mongo != null) {
      mongo.close();
    }
  }

  @Override
  protected MongoDatabase database() {
    return database;
  }

  /**
   * A re-created document's epoch comes from the server clock at millisecond precision. A server
   * whose clock advances one millisecond only every 50 readings makes "created, deleted and
   * re-created within one millisecond" the normal case: the store's deletions must wait for the
   * clock instead of letting the next creation repeat an epoch.
   */
  /** A server clock that advances one millisecond only every 50 readings. */
  private static Clock slowClock() {
    AtomicLong readings = new AtomicLong();
    Instant start = Instant.now();
    return new Clock() {
      @Override
      public Instant instant() {
        return start.plusMillis(readings.incrementAndGet() / 50);
      }

      @Override
      public ZoneId getZone() {
        return ZoneOffset.UTC;
      }

      @Override
      public Clock withZone(ZoneId zone) {
        return this;
      }
    };
  }

  /**
   * A re-created document's epoch comes from the server clock at millisecond precision. A server
   * whose clock advances one millisecond only every 50 readings makes "created, deleted and
   * re-created within one millisecond" the normal case: the store's deletions must wait for the
   * clock instead of letting the next creation repeat an epoch. On both clock paths: {@code $$NOW}
   * in the statement, and {@code hello} on a server without updates by pipeline.
   */
  @ParameterizedTest(name = "pipeline updates: {0}")
  @ValueSource(booleans = {true, false})
  void aDocumentDeletedAndRecreatedWithinOneServerMillisecondNeverRepeatsAnEpoch(boolean pipelineUpdates) {
    try (EmbeddedMongo slowServer = EmbeddedMongo.start(slowClock()).pipelineUpdates(pipelineUpdates);
        MongoClient c = slowServer.client()) {
      LeaseStore store = MongoLeaseStore.builder(c.getDatabase("slow")).build();
      for (int i = 0; i < 10; i++) {
        String name = "quick#" + i;
        Lease first = store.tryAcquire(name, "a", Duration.ofSeconds(30)).orElseThrow();
        store.release(first);
        assertThat(store.deleteIfIdle(name, first.epoch())).isTrue();
        Lease second = store.tryAcquire(name, "a", Duration.ofSeconds(30)).orElseThrow();
        assertThat(second.epoch()).as("round %d, after deleteIfIdle", i)
            .isGreaterThan(first.epoch());
        assertThat(store.delete(second)).isTrue();
        Lease third = store.tryAcquire(name, "b", Duration.ofSeconds(30)).orElseThrow();
        assertThat(third.epoch()).as("round %d, after delete", i).isGreaterThan(second.epoch());
      }
    }
  }

  /**
   * Release notices (LeaseStore#watchReleases): a release and a deletion under the prefix are
   * reported, in order; a renewal and records under other prefixes are not.
   */
  @Test
  void releasesAndDeletionsUnderThePrefixAreReportedButNotRenewalsOrOtherPrefixes() throws Exception {
    LeaseStore store = store();
    String prefix = "watch-" + UUID.randomUUID().toString().substring(0, 8) + "/shop.orders";
    java.util.concurrent.BlockingQueue<String> heard = new java.util.concurrent.LinkedBlockingQueue<>();
    try (AutoCloseable watch = store.watchReleases(prefix, heard::add)) {
      // The watch opens on its own thread: release a warm-up record until a notice arrives.
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        store.release(store.tryAcquire(prefix + "#warm", "a", LONG).orElseThrow());
        return heard.poll(300, TimeUnit.MILLISECONDS) != null;
      });
      Lease zero = store.tryAcquire(prefix + "#0", "a", LONG).orElseThrow();
      store.renew(zero, LONG);
      store.release(store.tryAcquire("other-" + prefix + "#0", "a", LONG).orElseThrow());
      store.release(zero);
      store.delete(store.tryAcquire(prefix + "#1", "a", LONG).orElseThrow());

      List<String> notices = new ArrayList<>();
      while (notices.size() < 2) {
        String name = heard.poll(30, TimeUnit.SECONDS);
        assertThat(name).as("a notice within 30 s after %s", notices).isNotNull();
        if (!name.endsWith("#warm")) {
          notices.add(name);
        }
      }
      assertThat(notices).containsExactly(prefix + "#0", prefix + "#1");
    }
  }

  /**
   * Issue 32 section 3 item 1: the oplog rolls past the release watch's open cursor (error 136
   * CappedPositionLost on its next getMore). Notices are hints, so the watch re-opens at the latest
   * position and goes on: the releases in between are not noticed (peers take them at their next
   * attempt), later ones are. Before, 136 counted as "change streams unavailable" and the notices
   * ended for the life of the process. On a server of its own, whose oplog the test trims; the
   * watch is held behind by its consumer, which blocks on the first notice.
   */
  @Test
  void releaseNoticesGoOnAfterTheOplogRollsPastTheWatchsPosition() throws Exception {
    try (EmbeddedMongo own = EmbeddedMongo.start(); MongoClient ownClient = own.client()) {
      LeaseStore store = MongoLeaseStore.builder(ownClient.getDatabase("lost")).build();
      String prefix = "lost/shop.orders";
      java.util.concurrent.BlockingQueue<String> heard = new java.util.concurrent.LinkedBlockingQueue<>();
      List<String> all = new java.util.concurrent.CopyOnWriteArrayList<>();
      java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(1);
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      try (AutoCloseable watch = store.watchReleases(prefix, name -> {
        all.add(name);
        heard.add(name);
        if (name.endsWith("#held")) {
          held.countDown();
          try {
            go.await(30, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        }
      })) {
        store.release(store.tryAcquire(prefix + "#held", "a", LONG).orElseThrow());
        assertThat(held.await(30, TimeUnit.SECONDS)).as("the first notice").isTrue();
        store.release(store.tryAcquire(prefix + "#missed", "a", LONG).orElseThrow());
        assertThat(own.loseHistoryUpToNow()).isPositive();
        go.countDown();

        // The watch re-opens at the latest position: release until a notice of this round arrives.
        await().atMost(Duration.ofSeconds(30)).until(() -> {
          store.release(store.tryAcquire(prefix + "#after", "a", LONG).orElseThrow());
          String n = heard.poll(300, TimeUnit.MILLISECONDS);
          return n != null && n.endsWith("#after");
        });
        assertThat(all).as("the release the lost history held is not noticed (a hint only)")
            .doesNotContain(prefix + "#missed").contains(prefix + "#held", prefix + "#after");
      }
    }
  }

  /**
   * The same through the failCommand fail point, so that it runs against a real deployment too
   * ({@code -Dsluice.mongodb.uri}, started with test commands enabled): the watch's next getMore
   * answers 136, and later releases are still noticed.
   */
  @Test
  void releaseNoticesGoOnAfterAGetMoreAnswered136() throws Exception {
    LeaseStore store = store();
    String prefix = "capped-" + UUID.randomUUID().toString().substring(0, 8) + "/shop.orders";
    java.util.concurrent.BlockingQueue<String> heard = new java.util.concurrent.LinkedBlockingQueue<>();
    try (AutoCloseable watch = store.watchReleases(prefix, heard::add)) {
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        store.release(store.tryAcquire(prefix + "#warm", "a", LONG).orElseThrow());
        return heard.poll(300, TimeUnit.MILLISECONDS) != null;
      });
      try (dev.sluice.testkit.mongo.FailCommand.Armed failing =
          dev.sluice.testkit.mongo.FailCommand.on("getMore").errorCode(136).times(1).enable(client)) {
        failing.awaitFired(1, Duration.ofSeconds(30));
      }
      heard.clear();
      await().atMost(Duration.ofSeconds(30)).until(() -> {
        store.release(store.tryAcquire(prefix + "#after", "a", LONG).orElseThrow());
        String n = heard.poll(300, TimeUnit.MILLISECONDS);
        return n != null && n.endsWith("#after");
      });
    }
  }

  /**
   * Reads decide nothing, so a user who may only read (an operator's status command) still lists
   * the records: when the store cannot stamp the shard's clock (error 13 from the stamp, injected
   * with the failCommand fail point as a real server would answer a read-only role), the store
   * time of the read comes from {@code hello} instead.
   */
  @Test
  void aStoreThatMayNotWriteStillReadsItsRecordsWithTheHelloClock() {
    try (EmbeddedMongo server = EmbeddedMongo.start(); MongoClient c = server.client()) {
      MongoLeaseStore writer = MongoLeaseStore.builder(c.getDatabase("read_only")).build();
      String name = uniqueName("read-only");
      Lease held = writer.tryAcquire(name, "a", LONG).orElseThrow();
      MongoLeaseStore reader = MongoLeaseStore.builder(c.getDatabase("read_only")).build();
      try (dev.sluice.testkit.mongo.FailCommand.Armed unauthorized =
          dev.sluice.testkit.mongo.FailCommand.on("findAndModify").errorCode(13).alwaysOn().enable(c)) {
        assertThat(reader.list(name)).singleElement().satisfies(r -> {
          assertThat(r.epoch()).isEqualTo(held.epoch());
          assertThat(r.isHeld()).isTrue();
          assertThat(Duration.between(r.storeTime(), Instant.now()).abs()).isLessThan(Duration.ofSeconds(5));
        });
        assertThatThrownBy(() -> reader.tryAcquire(name, "b", LONG))
            .as("a decision is never made without the shard's stamp")
            .isInstanceOf(dev.sluice.lease.LeaseStoreException.class);
      }
    }
  }

  @Test
  void serverClockSkewChangesNothing() {
    // Databases an hour ahead of and an hour behind this process: the store must behave as if
    // the clocks agreed, because expiry is judged entirely on the server's clock.
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
        await()
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
  void builderAndArgumentsAreValidatedNamingTheParameter() {
    assertThatThrownBy(() -> MongoLeaseStore.builder(null))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("database");
    assertThatThrownBy(() -> MongoLeaseStore.builder(database).collection(" "))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("collection");
    assertThatThrownBy(
            () -> MongoLeaseStore.builder(database).expireUnusedAfter(Duration.ofSeconds(1)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("expireUnusedAfter");
    assertThatThrownBy(
            () -> MongoLeaseStore.builder(database).expireUnusedAfter(Duration.ofMinutes(59)))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("expireUnusedAfter")
        .hasMessageContaining("1 hour");
    MongoLeaseStore store = MongoLeaseStore.builder(database).build();
    assertThatThrownBy(() -> store.tryAcquire("n", "o", Duration.ZERO))
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("duration");
  }

  @Test
  void documentShapeIsReadableByOperators() {
    MongoLeaseStore store =
        MongoLeaseStore.builder(database)
            .collection("shape")
            .expireUnusedAfter(Duration.ofDays(7))
            .build();
    String name = uniqueName("doc");
    Lease l = store.tryAcquire(name, "me", Duration.ofSeconds(30)).orElseThrow();
    store.commit(l, new Position("tok", Instant.parse("2024-05-01T10:00:00Z")));
    Document d = database.getCollection("shape").find(Filters.eq("_id", name)).first();
    assertThat(d.getString("owner")).isEqualTo("me");
    assertThat(d.getLong("epoch")).isEqualTo(l.epoch());
    assertThat(d.get("checkpoint", Document.class).getString("token")).isEqualTo("tok");
    assertThat(d.getDate("touchedAt")).isNotNull();
    assertThat(d.getBoolean("disposable")).as("a record with a checkpoint").isFalse();
    // Expiry is the shard's renewal stamp plus the grant's length (ADR 0083); expiresAt and
    // idleSince hold the store's estimate of it, made before the write.
    assertThat(d.getDate("renewedAt").toInstant().plusMillis(d.getLong("duration"))).isEqualTo(l.expiresAt());
    assertThat(d.getLong("duration")).isEqualTo(30_000L);
    assertThat(d.getLong("renewedEpoch")).isEqualTo(l.epoch());
    assertThat(d.getDate("idleSince").toInstant()).isBetween(l.expiresAt().minusSeconds(1), l.expiresAt());
    assertThat(d.getDate("expiresAt")).isEqualTo(d.getDate("idleSince"));
  }

  // ---------------------------------------------------------------- the optional TTL clean-up

  @Test
  void theCleanUpIndexOnlyCoversDisposableRecordsCountedFromWhenTheyWereLastHeld() {
    String collection = "ttl_" + UUID.randomUUID().toString().substring(0, 8);
    MongoLeaseStore.builder(database)
        .collection(collection)
        .expireUnusedAfter(Duration.ofDays(7))
        .build();

    assertThat(database.getCollection(collection).listIndexes())
        .filteredOn(index -> index.containsKey("expireAfterSeconds"))
        .singleElement()
        .satisfies(index -> {
          assertThat(index.getString("name")).isEqualTo("sluice_idle_disposable_ttl");
          assertThat(index.get("key", Document.class)).isEqualTo(new Document("idleSince", 1));
          assertThat(index.get("expireAfterSeconds", Number.class).longValue())
              .isEqualTo(Duration.ofDays(7).toSeconds());
          assertThat(index.get("partialFilterExpression", Document.class))
              .isEqualTo(new Document("disposable", true));
        });
    database.getCollection(collection).drop();
  }

  /**
   * The embedded server never runs a TTL monitor, so this test asks the collection exactly what
   * a real server's monitor would delete at a later time (the index's own key, expiry and
   * partial filter, read back with listIndexes), then deletes it as the monitor would.
   */
  @Test
  void theCleanUpNeverRemovesAHeldLeaseOrACheckpointAndEpochsSurviveIt() {
    Duration idle = MongoLeaseStore.MIN_IDLE;
    String collection = "ttl_" + UUID.randomUUID().toString().substring(0, 8);
    MongoLeaseStore store =
        MongoLeaseStore.builder(database).collection(collection).expireUnusedAfter(idle).build();
    Position position = new Position("tok", Instant.parse("2024-05-01T10:00:00Z"));

    // Held far longer than the idle period and never renewed meanwhile.
    Lease heldLong = store.tryAcquire(uniqueName("held-long"), "a", idle.multipliedBy(3))
        .orElseThrow();
    // The checkpoint of a group whose members are all down: released, then nobody for months.
    Lease down = store.commit(store.tryAcquire(uniqueName("group-down"), "a", Duration.ofSeconds(30))
        .orElseThrow(), position);
    store.release(down);
    // The checkpoint of a crashed holder: expired, never released.
    Lease crashed = store.commit(store.tryAcquire(uniqueName("crashed"), "a", Duration.ofSeconds(1))
        .orElseThrow(), position);
    // Disposable: a released lock and a crashed member's membership record.
    Lease lock = store.tryAcquire(uniqueName("lock"), "a", Duration.ofSeconds(30)).orElseThrow();
    store.release(lock);
    Lease member = store.tryAcquire(uniqueName("member"), "a", Duration.ofSeconds(1))
        .orElseThrow();
    Instant now = store.now();

    assertThat(ttlWouldDelete(collection, now.plus(idle).minusSeconds(60)))
        .as("nothing is idle for the whole period yet")
        .isEmpty();
    assertThat(ttlWouldDelete(collection, now.plus(idle).plusSeconds(120)))
        .as("an hour later: only the disposable records")
        .containsExactlyInAnyOrder(lock.name(), member.name());
    assertThat(ttlWouldDelete(collection, now.plus(idle.multipliedBy(3)).plusSeconds(60)))
        .as("the long lease is still held then")
        .containsExactlyInAnyOrder(lock.name(), member.name());
    assertThat(ttlWouldDelete(collection, now.plus(Duration.ofDays(3650))))
        .as("ten years later: never a checkpoint")
        .containsExactlyInAnyOrder(lock.name(), member.name(), heldLong.name());

    // A renewal moves the held lease's idleSince along with its expiry.
    Lease renewed = store.renew(heldLong, idle.multipliedBy(10));
    assertThat(ttlWouldDelete(collection, now.plus(idle.multipliedBy(5))))
        .doesNotContain(renewed.name());

    // The monitor deletes them (an hour later at the earliest: let the clock tick at least);
    // the names continue with higher epochs.
    await().atMost(Duration.ofSeconds(10)).until(() -> store.now().isAfter(now));
    for (String name : List.of(lock.name(), member.name())) {
      database.getCollection(collection).deleteOne(Filters.eq("_id", name));
    }
    assertThat(store.tryAcquire(lock.name(), "b", Duration.ofSeconds(30)).orElseThrow().epoch())
        .isGreaterThan(lock.epoch());
    assertThat(store.tryAcquire(member.name(), "b", Duration.ofSeconds(30)).orElseThrow().epoch())
        .isGreaterThan(member.epoch());
    assertThat(store.read(down.name()).orElseThrow().checkpoint()).isEqualTo(position);
    assertThat(store.read(crashed.name()).orElseThrow().checkpoint()).isEqualTo(position);
    database.getCollection(collection).drop();
  }

  @Test
  void anEarlierVersionsTtlIndexOnTouchedAtIsDropped() {
    String collection = "ttl_" + UUID.randomUUID().toString().substring(0, 8);
    database.getCollection(collection).createIndex(
        Indexes.ascending("touchedAt"), new IndexOptions().expireAfter(60L, TimeUnit.SECONDS));

    MongoLeaseStore.builder(database).collection(collection).build();

    assertThat(database.getCollection(collection).listIndexes())
        .noneMatch(index -> index.get("key", Document.class).containsKey("touchedAt"));
    database.getCollection(collection).drop();
  }

  /** The _ids a TTL monitor would delete at {@code at}, judged by the index as it is defined. */
  private static List<String> ttlWouldDelete(String collection, Instant at) {
    Document ttl = database.getCollection(collection).listIndexes().into(new ArrayList<>())
        .stream()
        .filter(index -> index.containsKey("expireAfterSeconds"))
        .reduce((a, b) -> {
          throw new AssertionError("more than one TTL index: " + a + ", " + b);
        })
        .orElseThrow();
    String field = ttl.get("key", Document.class).keySet().iterator().next();
    long seconds = ttl.get("expireAfterSeconds", Number.class).longValue();
    Document partial = ttl.get("partialFilterExpression", Document.class);
    Bson expired = Filters.lte(field, Date.from(at.minusSeconds(seconds)));
    Bson filter = partial == null ? expired : Filters.and(partial, expired);
    List<String> ids = new ArrayList<>();
    for (Document d : database.getCollection(collection).find(filter)) {
      ids.add(d.getString("_id"));
    }
    return ids;
  }
}
