package dev.sluice.mongodb.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.ServerAddress;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoCollection;
import com.mongodb.connection.ClusterConnectionMode;
import dev.sluice.ConfigurationException;
import dev.sluice.listener.BootstrapPolicy;
import dev.sluice.listener.CheckpointPolicy;
import dev.sluice.listener.Listener;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.mongodb.feed.MongoChangeFeed;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 34 section 2.2 for the MongoDB change feed: a server that keeps the feed's connections open
 * and never answers (the fault proxy's blackhole) never hangs a partition's thread. The feed's
 * client goes through a {@link FaultProxy} with the driver's defaults (no socket read timeout, no
 * {@code timeoutMS}); the lease store uses the test's own client, so only the feed is cut off. The
 * feed's client connects with {@code directConnection=true} ({@link ClusterConnectionMode#SINGLE})
 * to the one host the proxy forwards to, the primary, so that the test also runs against a real
 * replica set with {@code -Dsluice.mongodb.uri} (the driver would otherwise discover the members
 * and go around the proxy).
 */
class HalfOpenFeedTest {
  /** The feed's bound, short so the test is: every read fails within it (docs/adr/0102). */
  private static final Duration BOUND = Duration.ofSeconds(2);
  /** What a loaded build machine may add to a bound before the status shows it. */
  private static final Duration SLACK = Duration.ofSeconds(3);

  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  @RegisterExtension
  final FaultProxies proxies = new FaultProxies();

  private final List<AutoCloseable> closing = new ArrayList<>();
  private final String db = MONGO.freshDatabase().getName();
  private final List<Integer> handled = new CopyOnWriteArrayList<>();

  @AfterEach
  void cleanUp() throws Exception {
    proxies.passAll();
    for (AutoCloseable c : closing) {
      c.close();
    }
  }

  @Test
  void aBlackholedFeedFailsEachReadWithinItsBoundShowsItAndResumesWithNothingLostOrRepeated() {
    FaultProxy proxy = proxyToThePrimary();
    Listener<BsonDocument> listener = listener(proxy);
    write(0, 10);
    await().atMost(Duration.ofSeconds(30)).until(() -> handled.size() == 10);

    proxy.blackhole(Duration.ofSeconds(60));
    long blackholed = System.nanoTime();
    write(10, 20); // written while the feed cannot read
    await().atMost(BOUND.plus(SLACK)).pollInterval(Duration.ofMillis(50))
        .until(() -> retryingOnATimeout(listener.status().get(0)));
    Duration shown = Duration.ofNanos(System.nanoTime() - blackholed);
    PartitionStatus status = listener.status().get(0);
    assertThat(status.error()).as("the status names the client-side timeout").contains("MongoOperationTimeoutException");
    assertThat(handled).as("nothing handled while blackholed").hasSize(10);
    System.out.println("HalfOpenFeedTest: RETRYING on a timeout " + shown.toMillis() + " ms after the blackhole: "
        + status.error());

    // Still blackholed: the partition keeps retrying, each attempt failing within the bound.
    int attempts = status.attempts();
    await().atMost(BOUND.multipliedBy(2).plus(SLACK)).pollInterval(Duration.ofMillis(50))
        .until(() -> listener.status().get(0).attempts() > attempts);

    proxy.pass();
    long passed = System.nanoTime();
    await().atMost(Duration.ofSeconds(30)).until(() -> handled.size() >= 20);
    System.out.println("HalfOpenFeedTest: every change handled " + Duration.ofNanos(System.nanoTime() - passed).toMillis()
        + " ms after pass");
    assertThat(handled).as("every change written meanwhile, once, in order")
        .containsExactlyElementsOf(IntStream.range(0, 20).boxed().toList());
    await().atMost(Duration.ofSeconds(10)).until(() -> listener.status().get(0).state() == PartitionState.ACTIVE);
    assertThat(proxy.connectionsAccepted()).as("the feed read through the proxy, and reconnected through it")
        .isGreaterThan(1);
  }

  @Test
  void closeCompletesWithinItsBoundWhileTheFeedIsBlackholedAndTheStuckReadEndsWithinTheFeedsBound() {
    FaultProxy proxy = proxyToThePrimary();
    Listener<BsonDocument> listener = listener(proxy);
    write(0, 5);
    await().atMost(Duration.ofSeconds(30)).until(() -> handled.size() == 5);

    proxy.blackhole(Duration.ofSeconds(60));
    write(5, 6); // a read is in flight on a connection that no longer answers
    long started = System.nanoTime();
    listener.close();
    Duration took = Duration.ofNanos(System.nanoTime() - started);
    System.out.println("HalfOpenFeedTest: close took " + took.toMillis() + " ms while the feed was blackholed");
    // The listener's close never waits for a read of the feed (docs/adr/0102): with the lease store
    // answering it takes the commit and the release, well within one feed bound.
    assertThat(took).as("close while the feed is blackholed").isLessThan(BOUND);
    // The thread that was reading leaves when its read fails, within the feed's bound.
    await().atMost(BOUND.plus(SLACK)).pollInterval(Duration.ofMillis(50))
        .until(() -> Thread.getAllStackTraces().keySet().stream()
            .noneMatch(t -> t.isAlive() && t.getName().startsWith("sluice-g-" + db + ".orders-")));
    assertThat(proxy.bytesForwarded(FaultProxy.Direction.DOWNSTREAM)).as("the feed read through the proxy")
        .isPositive();
  }

  @Test
  void aServerAwaitThatIsNotShorterThanTheFeedsBoundIsRefusedNamingBoth() {
    MongoClient client = MONGO.client();
    assertThatThrownBy(() -> MongoChangeFeed.builder(client, db, "orders").operationTimeout(BOUND)
        .serverAwait(BOUND).build())
        .isInstanceOf(ConfigurationException.class)
        .hasMessageContaining("serverAwait").hasMessageContaining("operationTimeout");
  }

  private static boolean retryingOnATimeout(PartitionStatus s) {
    return s.state() == PartitionState.RETRYING && s.error() != null && s.error().contains("Timeout");
  }

  private Listener<BsonDocument> listener(FaultProxy proxy) {
    MongoClient feedClient = MongoClients.create(viaProxy(proxy));
    closing.add(feedClient);
    Listener<BsonDocument> l = Listener.builder(
            MongoChangeFeed.builder(feedClient, db, "orders").operationTimeout(BOUND).build(),
            MongoLeaseStore.builder(MONGO.client().getDatabase(db)).build())
        .group("g")
        .owner("n1")
        .leaseDuration(Duration.ofSeconds(10))
        .checkpoint(CheckpointPolicy.everyChange())
        .bootstrap(BootstrapPolicy.oldest())
        .handler((change, fence) -> handled.add(change.document().getInt32("n").getValue()))
        .build();
    closing.add(0, l); // before its client
    l.start();
    await().atMost(Duration.ofSeconds(30)).until(() -> l.status().get(0).state() == PartitionState.ACTIVE);
    return l;
  }

  /**
   * The deployment's settings (credentials, TLS) with the proxy as its one host, connected to
   * directly, and the driver's default timeouts.
   */
  private static MongoClientSettings viaProxy(FaultProxy proxy) {
    return MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(MONGO.connectionString()))
        .applyToClusterSettings(c -> c.hosts(List.of(new ServerAddress(proxy.host(), proxy.port())))
            .mode(ClusterConnectionMode.SINGLE).requiredReplicaSetName(null))
        .build();
  }

  /** A proxy to the primary (the embedded server's one host, or a real replica set's primary). */
  private FaultProxy proxyToThePrimary() {
    Document hello = MONGO.client().getDatabase("admin").runCommand(new Document("hello", 1));
    String primary = hello.getString("primary");
    ServerAddress to = new ServerAddress(primary != null ? primary
        : new ConnectionString(MONGO.connectionString()).getHosts().get(0));
    return proxies.to("mongo-feed", to.getHost(), to.getPort());
  }

  private void write(int from, int to) {
    MongoCollection<Document> orders = MONGO.client().getDatabase(db).getCollection("orders");
    for (int i = from; i < to; i++) {
      orders.insertOne(new Document("_id", "o" + i).append("n", i));
    }
  }
}
