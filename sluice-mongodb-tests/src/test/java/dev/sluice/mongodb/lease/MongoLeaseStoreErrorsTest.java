package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.MongoClientException;
import com.mongodb.MongoCommandException;
import com.mongodb.MongoException;
import com.mongodb.MongoInterruptedException;
import com.mongodb.MongoNotPrimaryException;
import com.mongodb.MongoSecurityException;
import com.mongodb.MongoSocketReadTimeoutException;
import com.mongodb.MongoTimeoutException;
import com.mongodb.MongoWriteException;
import com.mongodb.ServerAddress;
import com.mongodb.WriteError;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.CreateCollectionOptions;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.ValidationOptions;
import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.Document;
import org.junit.jupiter.api.Test;

/**
 * Deterministic failures stop, transient ones are retried: the store tells them apart with
 * {@link LeaseStoreException#retryable()}. On the embedded server, or a real one given
 * {@code -Dsluice.mongodb.uri} (for the validator test).
 */
class MongoLeaseStoreErrorsTest {

  private static final Duration LEASE = Duration.ofSeconds(30);

  @Test
  void aStoppedServerIsARetryableFailureNamingTheOperation() {
    EmbeddedMongo mongo = EmbeddedMongo.start();
    try (MongoClient client = MongoClients.create(mongo.clientSettings()
        .applyToClusterSettings(b -> b.serverSelectionTimeout(1, TimeUnit.SECONDS))
        .build())) {
      MongoLeaseStore store = MongoLeaseStore.builder(client.getDatabase("errors")).build();
      Lease lease = store.tryAcquire("n#0", "a", LEASE).orElseThrow();

      mongo.close();

      assertThatThrownBy(() -> store.renew(lease, LEASE))
          .isInstanceOfSatisfying(LeaseStoreException.class,
              e -> assertThat(e.retryable()).isTrue())
          .hasMessageContaining("renew lease 'n#0'")
          .hasMessageContaining("may succeed if retried");
      assertThatThrownBy(() -> store.commit(lease, new Position("p", null)))
          .isInstanceOfSatisfying(LeaseStoreException.class,
              e -> assertThat(e.retryable()).isTrue())
          .hasMessageContaining("commit lease 'n#0'");
      assertThatThrownBy(() -> store.tryAcquire("m#0", "a", LEASE))
          .isInstanceOfSatisfying(LeaseStoreException.class,
              e -> assertThat(e.retryable()).isTrue());
      assertThatThrownBy(() -> store.deleteIfIdle("n#0", lease.epoch()))
          .isInstanceOfSatisfying(LeaseStoreException.class,
              e -> assertThat(e.retryable()).isTrue());
    } finally {
      mongo.close();
    }
  }

  /**
   * A collection whose validator rejects the checkpoint field: the commit can never succeed, so
   * it is not retryable. A real server enforces the validator; where the server does not (the
   * embedded one), {@link FakeValidatingDatabase} answers as a real server would.
   */
  @Test
  void aCheckpointTheValidatorRejectsIsNotRetryable() {
    String uri = System.getProperty(MongoLeaseStoreTest.URI_PROPERTY);
    EmbeddedMongo mongo = uri == null || uri.isBlank() ? EmbeddedMongo.start() : null;
    try (MongoClient client = mongo != null ? mongo.client() : MongoClients.create(uri)) {
      MongoDatabase db = client.getDatabase("sluice_lease_errors");
      String collection = "validated_" + UUID.randomUUID().toString().substring(0, 8);
      MongoDatabase target = enforcesValidator(db, collection)
          ? db : FakeValidatingDatabase.rejecting(db, "checkpoint");
      MongoLeaseStore store = MongoLeaseStore.builder(target).collection(collection).build();
      Lease lease = store.tryAcquire("v#0", "a", LEASE).orElseThrow();

      assertThatThrownBy(() -> store.commit(lease, new Position("p", Instant.now())))
          .isInstanceOfSatisfying(LeaseStoreException.class, e -> {
            assertThat(e.retryable()).isFalse();
            assertThat(e.getCause()).isInstanceOf(MongoWriteException.class);
            assertThat(((MongoException) e.getCause()).getCode()).isEqualTo(121);
          })
          .hasMessageContaining("commit lease 'v#0'")
          .hasMessageContaining("error 121")
          .hasMessageContaining("validation");
      assertThat(store.renew(lease, LEASE).epoch()).as("the lease itself is intact")
          .isEqualTo(lease.epoch());
      db.getCollection(collection).drop();
    } finally {
      if (mongo != null) {
        mongo.close();
      }
    }
  }

  /** Creates {@code collection} with a validator rejecting {@code checkpoint}; is it enforced? */
  private static boolean enforcesValidator(MongoDatabase db, String collection) {
    try {
      db.createCollection(collection, new CreateCollectionOptions().validationOptions(
          new ValidationOptions().validator(Filters.exists("checkpoint", false))));
    } catch (MongoCommandException unsupported) {
      return false;
    }
    try {
      db.getCollection(collection).insertOne(new Document("_id", "probe").append("checkpoint", 1));
    } catch (MongoWriteException e) {
      if (e.getCode() == 121) {
        return true;
      }
      throw e;
    }
    db.getCollection(collection).deleteOne(Filters.eq("_id", "probe"));
    return false;
  }

  /** A server that cannot be reached is said first: a status line read "could not set up the indexes" during an outage. */
  @Test
  void aFailureToReachTheServerSaysSoBeforeTheStepThatNeededIt() {
    String unreachable = MongoLeaseFailures.failure("set up the indexes of collection 'sluice_leases'", null,
        new com.mongodb.MongoTimeoutException("Timed out while waiting for a server")).getMessage();
    assertThat(unreachable).startsWith("MongoDB lease store could not reach the server to set up the indexes")
        .contains("may succeed if retried");
    String refused = MongoLeaseFailures.failure("renew", "g/s#0of1", command(13)).getMessage();
    assertThat(refused).startsWith("MongoDB lease store could not renew lease 'g/s#0of1'");
  }

  @Test
  void driverErrorsAreClassifiedRetryableOrNot() {
    ServerAddress server = new ServerAddress();
    for (int code : List.of(13, 18, 2, 26, 121)) {
      assertThat(MongoLeaseFailures.retryable(command(code))).as("command error %d", code)
          .isFalse();
      assertThat(MongoLeaseFailures.retryable(new MongoWriteException(
          new WriteError(code, "no", new BsonDocument()), server, List.of())))
          .as("write error %d", code).isFalse();
    }
    assertThat(MongoLeaseFailures.retryable(new MongoSecurityException(null, "auth failed")))
        .isFalse();
    assertThat(MongoLeaseFailures.retryable(new MongoClientException("client closed")))
        .isFalse();

    for (int code : List.of(91, 189, 10107, 11600, 11602, 13435, 50, 6, 89, 9001)) {
      assertThat(MongoLeaseFailures.retryable(command(code))).as("command error %d", code)
          .isTrue();
    }
    assertThat(MongoLeaseFailures.retryable(new MongoTimeoutException("no server"))).isTrue();
    assertThat(MongoLeaseFailures.retryable(
        new MongoSocketReadTimeoutException("slow", server, new IOException("timeout")))).isTrue();
    assertThat(MongoLeaseFailures.retryable(new MongoNotPrimaryException(
        new BsonDocument("ok", new BsonInt32(0)).append("code", new BsonInt32(10107)), server)))
        .isTrue();
    assertThat(MongoLeaseFailures.retryable(new MongoInterruptedException("stop", null)))
        .isTrue();
    MongoCommandException labelled = command(1234);
    labelled.addLabel("RetryableWriteError");
    assertThat(MongoLeaseFailures.retryable(labelled)).isTrue();
    MongoCommandException transientTx = command(13);
    transientTx.addLabel(MongoException.TRANSIENT_TRANSACTION_ERROR_LABEL);
    assertThat(MongoLeaseFailures.retryable(transientTx)).as("the label wins").isTrue();
  }

  private static MongoCommandException command(int code) {
    return new MongoCommandException(new BsonDocument("ok", new BsonInt32(0))
        .append("code", new BsonInt32(code))
        .append("errmsg", new BsonString("error " + code)), new ServerAddress());
  }
}
