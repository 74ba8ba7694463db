package dev.sluice.mongodb.lease;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.ServerAddress;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.connection.ClusterConnectionMode;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import java.time.Duration;
import java.util.List;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code MongoLeaseStore.Builder.build()} sets up its indexes on the server, usually as the first
 * call of a client the application has just created; the driver's first call waits until the
 * client has found its server. That set-up is bounded by the operation timeout or 10 s, whichever
 * is longer, not by a short operation timeout meant for the renewals of held leases:
 * {@code LeaseStoreThatStopsAnsweringTest} (operation timeout 500 ms) once failed in
 * {@code build()} on a loaded machine, with the client still CONNECTING when 500 ms had passed.
 * Here the client reaches the server through a {@link FaultProxy} adding 300 ms to every chunk in
 * each direction, so the client's discovery alone takes more than the 200 ms operation timeout,
 * on any machine; the calls of the built store are still bounded by those 200 ms.
 *
 * <p>Runs on the embedded server or on a real deployment given {@code -Dsluice.mongodb.uri}: the
 * client connects with {@code directConnection=true} to the one host the proxy forwards to (the
 * primary), since the driver would otherwise discover the replica-set members and go around the
 * proxy.
 */
class LeaseStoreBuiltOnANewClientTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  @RegisterExtension
  final FaultProxies proxies = new FaultProxies();

  private static final Duration OPERATION_TIMEOUT = Duration.ofMillis(200);
  private static final Duration LATENCY = Duration.ofMillis(300);

  @Test
  void buildWaitsForANewClientToFindItsServerThoughTheOperationTimeoutIsShorter() {
    String database = MONGO.freshDatabase().getName();
    ServerAddress server = primary();
    FaultProxy proxy = proxies.to("lease-store", server.getHost(), server.getPort())
        .latency(LATENCY, Duration.ZERO, Duration.ofSeconds(60));
    try (MongoClient client = MongoClients.create(MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(MONGO.connectionString()))
        .applyToClusterSettings(c -> c.mode(ClusterConnectionMode.SINGLE) // directConnection=true
            .hosts(List.of(new ServerAddress(proxy.host(), proxy.port()))))
        .build())) {
      MongoLeaseStore store = MongoLeaseStore.builder(client.getDatabase(database))
          .operationTimeout(OPERATION_TIMEOUT).build();

      assertThat(store.collectionName()).isEqualTo(MongoLeaseStore.DEFAULT_COLLECTION);
      assertThat(proxy.connectionsAccepted()).as("connections through the proxy").isPositive();
      // Calls stay bounded by the operation timeout: a round trip through the proxy takes longer.
      assertThatThrownBy(() -> store.read("orders#0of1"))
          .isInstanceOfSatisfying(LeaseStoreException.class, e -> assertThat(e.retryable()).isTrue());
    }
  }

  /** The server the proxy forwards to: the primary of a replica set, else the one host. */
  private static ServerAddress primary() {
    Document hello = MONGO.client().getDatabase("admin").runCommand(new Document("hello", 1));
    String primary = hello.getString("primary");
    return primary != null ? new ServerAddress(primary)
        : new ServerAddress(new ConnectionString(MONGO.connectionString()).getHosts().get(0));
  }
}
