package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseStoreContract;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The conformance suite plus MongoDB-specific behaviour, on the embedded server (or a real one,
 * see {@link #URI_PROPERTY}; names are unique per run, so a real database can be reused).
 */
class MongoLeaseStoreTest extends LeaseStoreContract {

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
  protected LeaseStore createStore(Clock processClock) {
    // The MongoDB store takes no process clock: every time it uses comes from the server
    // (isMaster localTime), so there is nothing to hand the skewed clock to. The contract's skew
    // tests therefore pass by construction; serverClockSkewChangesNothing below skews the
    // database's clock instead, which is the same relative skew seen from the other side.
    return MongoLeaseStore.builder(database).build();
  }

  @Test
  void epochsKeepIncreasingAfterTheDocumentIsDeleted() {
    MongoLeaseStore store = MongoLeaseStore.builder(database).build();
    String name = uniqueName("deleted");
    long last = 0;
    for (int i = 0; i < 5; i++) {
      Lease l = store.tryAcquire(name, "a", Duration.ofSeconds(30)).orElseThrow();
      assertThat(l.epoch()).isGreaterThan(last);
      last = l.epoch();
      store.release(l);
    }
    // What the optional TTL clean-up does on a real server (the embedded one never expires).
    database.getCollection(store.collectionName()).deleteOne(Filters.eq("_id", name));
    Lease recreated = store.tryAcquire(name, "a", Duration.ofSeconds(30)).orElseThrow();
    assertThat(recreated.epoch()).isGreaterThan(last);
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
    assertThat(database.getCollection("shape").listIndexes())
        .as("the optional clean-up is a TTL index on touchedAt")
        .anySatisfy(
            index -> {
              assertThat(index.get("key", Document.class)).containsKey("touchedAt");
              assertThat(index.get("expireAfterSeconds", Number.class).longValue())
                  .isEqualTo(Duration.ofDays(7).toSeconds());
            });
  }
}
