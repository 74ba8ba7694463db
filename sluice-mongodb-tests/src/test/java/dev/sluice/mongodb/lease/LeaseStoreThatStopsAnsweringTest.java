package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Issue 11 item 7: every lease-store call is bounded. The embedded server is told to stop
 * answering (it keeps the connection and never replies: a hung primary, or majority write concern
 * with no reachable majority), and the client has the driver's defaults (no socket read timeout),
 * as applications often do. Before, a call waited forever: renewals, workers and close() hung.
 */
class LeaseStoreThatStopsAnsweringTest {

  @Test
  void everyCallFailsAsRetryableWithinTheOperationTimeoutWhenTheServerStopsAnswering() {
    try (EmbeddedMongo server = EmbeddedMongo.start();
        MongoClient client = MongoClients.create(MongoClientSettings.builder()
            .applyConnectionString(new ConnectionString(server.connectionString())).build())) {
      LeaseStore store = MongoLeaseStore.builder(client.getDatabase("shop"))
          .operationTimeout(Duration.ofMillis(500)).build();
      var lease = store.tryAcquire("orders#0of1", "n1", Duration.ofSeconds(5)).orElseThrow();

      server.stall(true);
      assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
        assertThatThrownBy(() -> store.renew(lease, Duration.ofSeconds(5)))
            .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable()).isTrue());
        assertThatThrownBy(() -> store.tryAcquire("orders#1of2", "n1", Duration.ofSeconds(5)))
            .isInstanceOf(LeaseStoreException.class);
        assertThatThrownBy(() -> store.read("orders#0of1")).isInstanceOf(LeaseStoreException.class);
      }, "a lease-store call waited for a server that does not answer");

      server.stall(false);
      assertThat(store.read("orders#0of1")).isPresent();
    }
  }
}
