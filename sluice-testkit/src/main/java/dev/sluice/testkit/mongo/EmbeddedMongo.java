package dev.sluice.testkit.mongo;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import de.bwaldvogel.mongo.MongoServer;
import java.net.InetSocketAddress;
import java.time.Clock;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * The in-JVM MongoDB for tests and the demo: mongo-java-server with its memory backend, bound to
 * a random local port, oplog enabled so change streams work.
 *
 * <p>It is a low-fidelity wire-protocol server (see {@code shared/embedded-servers.md}): no
 * sessions, no transactions, no pipeline updates, no invalidate events; its change events come from
 * the test kit's {@link FaithfulOplog} (right {@code documentKey}, {@code updateDescription},
 * {@code replace} events, lookups of deleted documents return null, error 47 for a missing
 * {@code required} pre- or post-image, images that expire per {@code setClusterParameter}), and
 * history is lost only when a test asks for it ({@link #trimOplogBefore}). Code
 * under test must target real MongoDB; behaviour only a replica set shows is tested with driver
 * fakes.
 *
 * <pre>{@code
 * try (EmbeddedMongo mongo = EmbeddedMongo.start();
 *     MongoClient client = mongo.client()) { ... }
 * }</pre>
 */
public final class EmbeddedMongo implements AutoCloseable {
  /**
   * Event-loop threads serving connections (each started when a connection is first given to it,
   * round robin). The server runs each command on its connection's thread, so a command held by a
   * fail point's {@code blockConnection}, a {@code waitForFailPoint} or {@link #stall} holds every
   * connection sharing that thread: with this many, a connection has a thread of its own until
   * this many connections were opened to one server, as on a real server, where a held command
   * holds only its own connection. Not more: netty opens every loop's selector (a file descriptor
   * and its buffers) when the server starts, whether or not a connection ever uses it; 1,024 per
   * server filled a test JVM's heap once a few servers were alive at a time.
   */
  private static final int WORKER_THREADS = 64;

  private MongoServer server;
  /** Servers replaced by {@link #startServer()}; shut down with this one. */
  private final java.util.List<MongoServer> stopped = new java.util.ArrayList<>();
  private final TrimmableMemoryBackend backend;
  private final String connectionString;
  private final InetSocketAddress address;

  private EmbeddedMongo(MongoServer server, TrimmableMemoryBackend backend, InetSocketAddress address) {
    this.server = server;
    this.backend = backend;
    this.address = address;
    this.connectionString = "mongodb://" + address.getHostString() + ":" + address.getPort();
  }

  /** Starts a server whose clock is the system clock. */
  public static EmbeddedMongo start() {
    return start(Clock.systemUTC());
  }

  /**
   * Starts a server whose clock is {@code serverClock}: what {@code $currentDate} writes (a date;
   * the stock server read the process clock), what {@code $$NOW} is and what {@code hello}
   * reports as {@code localTime}. Lets tests move the database's clock
   * independently of the process clock.
   */
  public static EmbeddedMongo start(Clock serverClock) {
    Objects.requireNonNull(serverClock, "serverClock");
    TrimmableMemoryBackend backend = new TrimmableMemoryBackend(serverClock);
    MongoServer server = new MongoServer(backend);
    server.enableOplog();
    server.bind(new InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 0, WORKER_THREADS);
    return new EmbeddedMongo(server, backend, server.getLocalAddress());
  }

  /** {@code mongodb://host:port} of this server. */
  public String connectionString() {
    return connectionString;
  }

  /**
   * A new client with timeouts suited to tests: a dead server fails an operation within seconds
   * instead of the driver's default 30 s. The caller closes it.
   */
  public MongoClient client() {
    return MongoClients.create(clientSettings().build());
  }

  /** The settings {@link #client()} uses, for callers that want to adjust them. */
  public MongoClientSettings.Builder clientSettings() {
    return MongoClientSettings.builder()
        .applyConnectionString(new ConnectionString(connectionString))
        .applyToClusterSettings(b -> b.serverSelectionTimeout(5, TimeUnit.SECONDS))
        .applyToSocketSettings(
            b -> b.connectTimeout(2, TimeUnit.SECONDS).readTimeout(10, TimeUnit.SECONDS))
        .applyToConnectionPoolSettings(b -> b.maxWaitTime(5, TimeUnit.SECONDS));
  }

  /**
   * Loses history the way a real replica set's capped oplog does: deletes every oplog entry older
   * than {@code operationTime}. Opening a change stream before the retained history afterwards
   * fails with error 286 (ChangeStreamHistoryLost), and a change stream cursor already open whose
   * next entry was deleted answers its next getMore with error 136 (CappedPositionLost), as on a
   * real server; without this the embedded server never loses history and would silently skip the
   * deleted changes.
   *
   * @return the number of entries deleted
   */
  public int trimOplogBefore(org.bson.BsonTimestamp operationTime) {
    return backend
        .oplog()
        .trimBefore(new de.bwaldvogel.mongo.bson.BsonTimestamp(operationTime.getValue()));
  }

  /**
   * Loses every change written so far, as a capped oplog that rolled over does: writes a marker
   * document into a collection of the test kit's own (so no stream under test sees it) and deletes
   * every oplog entry before it ({@link #trimOplogBefore}). A stream resumed from any earlier
   * position then fails with error 286, and an open one that had not read everything yet with 136.
   *
   * @return the number of entries deleted
   */
  public int loseHistoryUpToNow() {
    try (MongoClient c = client()) {
      c.getDatabase("sluice_testkit").getCollection("history_marker").insertOne(new org.bson.Document());
    }
    FaithfulOplog oplog = backend.oplog();
    return oplog.trimBefore(oplog.storedThrough());
  }

  /**
   * Answers the handshake ({@code hello}, {@code isMaster}) as a mongos router does, for tests of
   * what must be refused or handled differently on a sharded cluster. Set it before creating
   * clients.
   */
  public EmbeddedMongo reportAsMongos(boolean on) {
    backend.reportAsMongos(on);
    return this;
  }

  /**
   * Adds {@code operationTime} (the newest oplog entry's timestamp) to handshake replies, as the
   * members of a replica set and routers of a sharded cluster report the cluster's operation time.
   * Off by default: the server is a standalone one.
   */
  public EmbeddedMongo reportOperationTime(boolean on) {
    backend.reportOperationTime(on);
    return this;
  }

  /**
   * Whether {@code hello} is answered (the default, as every MongoDB since 4.4.2) or refused with
   * error 59 as older servers do, for tests of the {@code isMaster} fallback.
   */
  public EmbeddedMongo answerHello(boolean on) {
    backend.answerHello(on);
    return this;
  }

  /**
   * Whether updates given as an aggregation pipeline (and {@code findAndModify} with one) are
   * executed, as by every MongoDB since 4.2 (the default), or refused with error 14 as older
   * servers do, for tests of what Sluice does without them.
   */
  public EmbeddedMongo pipelineUpdates(boolean on) {
    backend.pipelineUpdates(on);
    return this;
  }

  /**
   * The {@code localTime} successive {@code hello} replies report: the server clock plus each
   * offset in turn, as when successive calls reach different mongos routers whose clocks differ.
   * {@code $$NOW} and {@code $currentDate} keep the server clock (see {@link #routerClockOffsets}
   * for a {@code $$NOW} that differs per command).
   */
  public EmbeddedMongo helloClockOffsets(java.time.Duration... offsets) {
    backend.helloClockOffsets(offsets);
    return this;
  }

  /**
   * The {@code $$NOW} successive commands see (in filters, pipelines and updates by pipeline of
   * {@code find}, {@code count}, {@code aggregate}, {@code findAndModify}, {@code update} and
   * {@code delete}): the server clock plus each offset in turn, as on a sharded cluster where
   * successive commands go through different mongos routers. A mongos resolves {@code $$NOW} from
   * its own clock and sends it to the shard with the command (the command's "runtime constants",
   * {@code Variables::generateRuntimeConstants} in the server's source), so two routers give two
   * clocks. {@code $currentDate} of a classic update keeps the server clock: the shard that applies
   * the update sets it. With a single offset of zero (the default) every command sees the server clock.
   */
  public EmbeddedMongo routerClockOffsets(java.time.Duration... offsets) {
    backend.routerClockOffsets(offsets);
    return this;
  }

  /**
   * Treats {@code database.collection} as a collection of a sharded cluster sharded on
   * {@code keyFields}: an upsert (or an explained one) whose filter does not give every key field
   * by equality is refused with error 61, ShardKeyNotFound, as a mongos refuses to route it.
   * Nothing else changes: the data stays on this one server.
   */
  public EmbeddedMongo shardCollection(String namespace, String... keyFields) {
    backend.shardCollection(namespace, java.util.List.of(keyFields));
    return this;
  }

  /**
   * While on, the server accepts connections and commands but answers none (a hung primary, a
   * partition that drops replies): for tests that every call is bounded. Turn it off, or close the
   * server, to release the waiting commands.
   */
  public EmbeddedMongo stall(boolean on) {
    backend.stall(on);
    return this;
  }

  /**
   * Stops the server as a crashed or stopped {@code mongod} is: new connections are refused and
   * each open one is dropped at its next command. The data stays; {@link #startServer()} serves it
   * again on the same port.
   */
  public synchronized EmbeddedMongo stopServer() {
    backend.dropConnections(true);
    server.stopListening();
    return this;
  }

  /** Serves again, on the same address, after {@link #stopServer()}. */
  public synchronized EmbeddedMongo startServer() {
    stopped.add(server);
    MongoServer next = new MongoServer(backend); // the backend keeps its oplog: not enabled again
    next.bind(address, 0, WORKER_THREADS);
    server = next;
    backend.dropConnections(false);
    return this;
  }

  @Override
  public synchronized void close() {
    backend.stall(false);
    backend.dropConnections(false);
    server.shutdownNow();
    for (MongoServer old : stopped) {
      old.shutdownNow();
    }
  }

  @Override
  public String toString() {
    return "EmbeddedMongo[" + connectionString + "]";
  }
}
