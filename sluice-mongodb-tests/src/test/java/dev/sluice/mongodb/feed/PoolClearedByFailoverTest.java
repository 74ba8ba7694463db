package dev.sluice.mongodb.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.MongoConnectionPoolClearedException;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import com.mongodb.event.ConnectionCheckOutStartedEvent;
import com.mongodb.event.ConnectionPoolListener;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.mongodb.internal.MongoErrors;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.mongo.FailCommand;
import java.time.Duration;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A failover clears the driver's connection pool: a primary that steps down answers the commands
 * in flight with 91 ShutdownInProgress (or closes their connections), and the driver then clears
 * the pool of that server. Every operation of the same client waiting for one of its connections
 * fails at that moment with {@link MongoConnectionPoolClearedException}, which the driver does not
 * retry for a command such as {@code hello}. So on a real replica set a change stream opening
 * during any stepdown can meet it. Before, the feed took it for a permanent error, and the
 * partition stopped for good (FAILED), as one CI run of {@code ErrorCatalogueTest} showed: several
 * of its rows make the driver clear the feed client's pool while a partition opens.
 *
 * <p>Here the fail point makes the server answer what a stepping-down primary answers, to a
 * command that holds the client's only connection while the feed waits for it. Runs against a
 * real replica set with {@code -Dsluice.mongodb.uri} (test commands enabled).
 */
class PoolClearedByFailoverTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private static final Duration WAIT = Duration.ofSeconds(30);

  /**
   * How long the step-down answer holds the pool's one connection: the time the feed has to start
   * waiting for it. The test checks that it did, rather than trusting the time.
   */
  private static final Duration HELD = Duration.ofSeconds(5);

  @Test
  void aFeedOpeningWhileAFailoverClearsThePoolFailsRetryablyAndOpensOnceTheServerIsBack() throws Exception {
    MongoDatabase data = MONGO.freshDatabase();
    data.getCollection("orders").insertOne(new Document("_id", "a"));
    String app = "pool-cleared-" + UUID.randomUUID().toString().substring(0, 8);
    Set<Thread> checkingOut = ConcurrentHashMap.newKeySet();
    MongoClientSettings settings = MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(MONGO.connectionString()))
        .applicationName(app)
        .applyToConnectionPoolSettings(b -> b.maxSize(1).addConnectionPoolListener(new ConnectionPoolListener() {
          @Override
          public void connectionCheckOutStarted(ConnectionCheckOutStartedEvent event) {
            checkingOut.add(Thread.currentThread()); // events of a checkout come on the thread that asks
          }
        }))
        .build();
    ExecutorService threads = Executors.newFixedThreadPool(2);
    try (MongoClient client = MongoClients.create(settings);
        FailCommand.Armed stepDown = FailCommand.on("find").appName(app)
            .namespace(data.getName() + ".blocker").block(HELD).errorCode(91).times(1).enable(MONGO.client())) {
      ChangeFeed<BsonDocument> feed = MongoChangeFeed.builder(client, data.getName(), "orders").build();
      Future<?> holder = threads.submit(() -> client.getDatabase(data.getName()).getCollection("blocker").find().first());
      stepDown.awaitFired(1, WAIT);

      AtomicReference<Thread> opener = new AtomicReference<>();
      Future<FeedCursor<BsonDocument>> open = threads.submit(() -> {
        opener.set(Thread.currentThread());
        return feed.open(PartitionSpec.single(), StartPoint.oldest());
      });
      await("the feed waits for the pool's one connection").atMost(WAIT)
          .until(() -> opener.get() != null && checkingOut.contains(opener.get()));
      assertThat(holder.isDone()).as("the connection is still held by the command the step-down answers: the"
          + " feed waited for it before the pool was cleared (else raise HELD)").isFalse();

      Throwable failed = null;
      try {
        open.get(WAIT.toSeconds(), TimeUnit.SECONDS).close();
      } catch (ExecutionException e) {
        failed = e.getCause();
      }
      assertThat(failed).as("opening while the pool is cleared fails").isInstanceOf(FeedException.class);
      assertThat(failed).as("because the driver cleared the pool").hasCauseInstanceOf(MongoConnectionPoolClearedException.class);
      assertThat(((FeedException) failed).retryable())
          .as("a failover is transient: the partition must try again, not stop for good: %s", failed).isTrue();
      assertThat(failed).hasMessageContaining("MongoConnectionPoolClearedException");

      await("the feed opens once the server is back").atMost(WAIT).ignoreExceptionsInstanceOf(FeedException.class)
          .until(() -> {
            try (FeedCursor<BsonDocument> c = feed.open(PartitionSpec.single(), StartPoint.oldest())) {
              return c.position() != null;
            }
          });
    } finally {
      threads.shutdownNow();
    }
  }

  /**
   * Both exceptions the driver throws for an operation caught by a failover (a pool it cleared, a
   * server it dropped) are transient, for the feed and for the lease store (which asks
   * {@link MongoErrors#isTransient} first); a client that refuses is not.
   */
  @Test
  void theDriversFailoverExceptionsAreTransient() {
    com.mongodb.connection.ServerId server = new com.mongodb.connection.ServerId(
        new com.mongodb.connection.ClusterId(), new com.mongodb.ServerAddress("db.example", 27017));
    MongoConnectionPoolClearedException cleared = new MongoConnectionPoolClearedException(server, null);
    com.mongodb.MongoServerUnavailableException dropped =
        new com.mongodb.MongoServerUnavailableException("The server at db.example:27017 is no longer available");
    assertThat(MongoErrors.isTransient(cleared)).isTrue();
    assertThat(MongoErrors.isTransient(dropped)).isTrue();
    assertThat(MongoFeedErrors.isRetryable(cleared)).isTrue();
    assertThat(MongoFeedErrors.isRetryable(dropped)).isTrue();
    assertThat(MongoErrors.isTransient(new com.mongodb.MongoClientException("state should be: open")))
        .as("a client that refuses (closed) is not a failover").isFalse();
    assertThat(MongoFeedErrors.isRetryable(new com.mongodb.MongoClientException("state should be: open"))).isFalse();
  }
}
