package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import io.netty.channel.Channel;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.time.Clock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/** The memory backend with the test kit's {@link FaithfulOplog} and {@link FaithfulDatabase}. */
final class TrimmableMemoryBackend extends MemoryBackend {

  private volatile FaithfulOplog oplog;
  /** Open multi-document transactions, applied at commit as one oplog entry. */
  private final Transactions transactions = new Transactions();
  /** Namespaces whose collection has changeStreamPreAndPostImages enabled. */
  private final Set<String> withImages = ConcurrentHashMap.newKeySet();

  private final Clock clock;
  /** Makes a write and its oplog entry visible together ({@link FaithfulDatabase}). */
  private final java.util.concurrent.locks.ReadWriteLock visibility =
      new java.util.concurrent.locks.ReentrantReadWriteLock();

  TrimmableMemoryBackend(Clock clock) {
    super(clock);
    this.clock = clock;
    this.batches = new ReplyBatches(getCursorRegistry());
  }

  /** Reply batches of at most 16 MiB, as a real server's ({@link ReplyBatches}). */
  private final ReplyBatches batches;

  private volatile boolean pipelineUpdates = true;
  /** Namespaces staged as sharded, with their shard-key fields. */
  private final Map<String, List<String>> shardKeys = new ConcurrentHashMap<>();

  /** Routes upserts into {@code namespace} as a mongos does for a collection sharded on {@code key}. */
  void shardCollection(String namespace, List<String> key) {
    shardKeys.put(namespace, List.copyOf(key));
  }

  private volatile Duration[] helloClockOffsets = {Duration.ZERO};
  private final AtomicLong helloReplies = new AtomicLong();

  /** Whether updates given as a pipeline are executed (MongoDB 4.2+) or refused as before 4.2. */
  void pipelineUpdates(boolean on) {
    pipelineUpdates = on;
  }

  /**
   * The {@code localTime} of successive handshake replies: the server clock plus each offset in
   * turn, as when every call reaches another mongos with its own clock.
   */
  void helloClockOffsets(Duration... offsets) {
    if (offsets.length == 0) {
      throw new IllegalArgumentException("at least one offset");
    }
    helloClockOffsets = offsets.clone();
  }

  private volatile Duration[] routerClockOffsets = {Duration.ZERO};
  private final AtomicLong routedCommands = new AtomicLong();

  /**
   * The {@code $$NOW} of successive commands: the server clock plus each offset in turn, as when
   * every command reaches another mongos, which resolves {@code $$NOW} itself from its own clock
   * and sends it to the shard with the command. {@code $currentDate} keeps the server clock.
   */
  void routerClockOffsets(Duration... offsets) {
    if (offsets.length == 0) {
      throw new IllegalArgumentException("at least one offset");
    }
    routerClockOffsets = offsets.clone();
  }

  /** The {@code $$NOW} of the next command that evaluates it. */
  java.time.Instant routerNow() {
    Duration[] offsets = routerClockOffsets;
    return clock.instant().plus(offsets[(int) (routedCommands.getAndIncrement() % offsets.length)]);
  }

  private volatile boolean mongos;
  private volatile boolean hello = true;
  private volatile boolean operationTime;
  private final Object stallLock = new Object();
  private boolean stalled;

  /** While on, every command waits (the connection stays open, no reply comes). */
  void stall(boolean on) {
    synchronized (stallLock) {
      stalled = on;
      stallLock.notifyAll();
    }
  }

  private void awaitNotStalled() {
    synchronized (stallLock) {
      while (stalled) {
        try {
          stallLock.wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    }
  }

  private volatile boolean dropConnections;

  /** While on, every command closes its connection unanswered, as when the server process died. */
  void dropConnections(boolean on) {
    dropConnections = on;
  }

  /** Adds {@code operationTime} (the newest oplog entry's) to handshake replies. */
  void reportOperationTime(boolean on) {
    operationTime = on;
  }

  /** Answers the handshake as a mongos router does ({@code msg: "isdbgrid"}). */
  void reportAsMongos(boolean on) {
    mongos = on;
  }

  /** Whether {@code hello} is answered (as every MongoDB since 4.4.2) or unknown (error 59). */
  void answerHello(boolean on) {
    hello = on;
  }

  private final FailPoints failPoints = new FailPoints();
  /** The application name each connection gave in its handshake, for fail points with {@code appName}. */
  private final Map<Channel, String> appNames = new ConcurrentHashMap<>();

  @Override
  public Document handleCommand(Channel channel, String databaseName, String command, Document query) {
    awaitNotStalled();
    if (dropConnections) {
      channel.close();
      throw new MongoServerError(91, "ShutdownInProgress", "the server is stopped");
    }
    boolean isHello = command.equalsIgnoreCase("hello");
    if (isHello || command.equalsIgnoreCase("ismaster")) {
      rememberAppName(channel, query);
    }
    if (command.equals("configureFailPoint")) {
      return failPoints.configure(query);
    }
    if (command.equals("waitForFailPoint")) {
      try {
        return failPoints.await(query);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new MongoServerError(11601, "Interrupted", "interrupted while waiting for the fail point");
      }
    }
    FailPoints.Action failure =
        failPoints.enter(command, databaseName + "." + query.get(command), appNames.get(channel));
    if (failure != null) {
      Document failed = fail(failure, channel, query);
      if (failed != null) {
        return failed;
      }
    }
    if (Transactions.isTransactional(command, query)) {
      return transactions.handle(databaseName, command, query, new Transactions.Runner() {
        @Override
        public Document run(String database, String cmd, Document q) {
          Document response = isolated(cmd, q, () -> TrimmableMemoryBackend.super.handleCommand(channel, database, cmd, q));
          if (cmd.equals("getMore") || cmd.equals("aggregate")) {
            addPostBatchResumeToken(response);
          }
          return response;
        }

        @Override
        public void commit(List<Transactions.Write> writes, Document lsid, long txnNumber) {
          visibility.writeLock().lock();
          try {
            oplog().commitTransaction(() -> {
              for (Transactions.Write w : writes) {
                TrimmableMemoryBackend.super.handleCommand(channel, w.database(), w.command(), w.query());
              }
            }, lsid, txnNumber);
          } finally {
            visibility.writeLock().unlock();
          }
        }
      });
    }
    if (isHello && !hello) {
      throw new MongoServerError(59, "CommandNotFound", "no such command: 'hello'");
    }
    if ("admin".equals(databaseName) && command.equalsIgnoreCase("setClusterParameter")) {
      return setClusterParameter(query.get(command));
    }
    if ("admin".equals(databaseName) && command.equalsIgnoreCase("getClusterParameter")) {
      return getClusterParameter(query.get(command));
    }
    if (command.equals("getMore") && batches.owns(query.get("getMore"))) {
      return batches.getMore(query, stockId -> {
        Document stockQuery = new Document(query);
        stockQuery.put("getMore", stockId);
        return isolated(command, stockQuery, () -> super.handleCommand(channel, databaseName, command, stockQuery));
      });
    }
    Document toRun = query;
    if (command.equals("killCursors") && query.get("cursors") instanceof List<?> ids) {
      toRun = new Document(query);
      toRun.put("cursors", batches.kill(ids));
    }
    Document run = toRun;
    Document response;
    if (oplog != null && SnapshotReads.applies(command, query)) {
      response = snapshotRead(channel, databaseName, command, query);
    } else {
      response = isolated(command, run,
          () -> super.handleCommand(channel, databaseName, isHello ? "ismaster" : command, run));
      if (command.equals("find")) {
        response = batches.find(query, response);
      }
    }
    if (failure != null && failure.writeConcernError() != null) {
      FailPoints.withWriteConcernError(failure, response, query);
    }
    if (command.equals("getMore") || command.equals("aggregate")) {
      addPostBatchResumeToken(response);
    }
    if (isHello || command.equalsIgnoreCase("ismaster")) {
      if (isHello) {
        response.put("isWritablePrimary", Boolean.TRUE);
      }
      if (hello && Boolean.TRUE.equals(query.get("helloOk"))) {
        // As every server since 4.4.2 (and 5.0+): the driver then monitors with hello, not
        // isMaster, so a fail point on hello reaches its heartbeats as on a real server.
        response.put("helloOk", Boolean.TRUE);
      }
      asSupportedServer(response, channel);
      Duration[] offsets = helloClockOffsets;
      response.put("localTime", clock.instant().plus(offsets[(int) (helloReplies.getAndIncrement() % offsets.length)]));
      de.bwaldvogel.mongo.bson.BsonTimestamp newest = operationTime && oplog != null ? oplog.newest() : null;
      if (newest != null) {
        response.put("operationTime", newest);
      }
    }
    return response;
  }

  /** The one cluster parameter the test kit knows, as MongoDB 6.0+ names it. */
  private static final String CHANGE_STREAM_OPTIONS = "changeStreamOptions";

  /**
   * {@code setClusterParameter: {changeStreamOptions: {preAndPostImages: {expireAfterSeconds: N | "off"}}}}
   * on the admin database, as MongoDB 6.0+ takes it: from then on images older than N seconds, on the
   * server's clock, are gone ({@link FaithfulOplog}).
   */
  private Document setClusterParameter(Object value) {
    if (!(value instanceof Document parameter) || parameter.size() != 1) {
      throw new MongoServerError(2, "BadValue", "setClusterParameter takes one parameter: {name: {value}}");
    }
    String name = parameter.keySet().iterator().next();
    if (!CHANGE_STREAM_OPTIONS.equals(name)) {
      throw new MongoServerError(2, "BadValue", "Unknown Cluster Parameter " + name
          + " (the test kit knows " + CHANGE_STREAM_OPTIONS + ")");
    }
    Object options = parameter.get(name);
    Object images = options instanceof Document d ? d.get("preAndPostImages") : null;
    Object expire = images instanceof Document d ? d.get("expireAfterSeconds") : null;
    Long seconds;
    if ("off".equals(expire)) {
      seconds = null;
    } else if (expire instanceof Number n && n.doubleValue() >= 1 && n.doubleValue() == n.longValue()) {
      seconds = n.longValue();
    } else {
      throw new MongoServerError(2, "BadValue", "changeStreamOptions.preAndPostImages.expireAfterSeconds must be"
          + " 'off' or a whole number of seconds of at least 1, but was " + expire);
    }
    oplog().imagesExpireAfter(seconds);
    return new Document("ok", 1.0);
  }

  /** {@code getClusterParameter: "changeStreamOptions"} (or a list of names, or {@code "*"}), as MongoDB 6.0+ answers it. */
  private Document getClusterParameter(Object names) {
    boolean ours = "*".equals(names) || CHANGE_STREAM_OPTIONS.equals(names)
        || names instanceof List<?> l && l.stream().allMatch(CHANGE_STREAM_OPTIONS::equals) && !l.isEmpty();
    if (!ours) {
      throw new MongoServerError(2, "BadValue", "Unknown Cluster Parameter " + names
          + " (the test kit knows " + CHANGE_STREAM_OPTIONS + ")");
    }
    Long seconds = oplog().imagesExpireAfterSeconds();
    Document parameter = new Document("_id", CHANGE_STREAM_OPTIONS)
        .append("preAndPostImages", new Document("expireAfterSeconds", seconds == null ? (Object) "off" : seconds));
    return new Document("clusterParameters", List.of(parameter)).append("ok", 1.0);
  }

  /** The replica set the server says it is the primary of (as a one-member set would). */
  static final String REPLICA_SET = "sluice-testkit";
  /** MongoDB 6.0's wire version: the driver takes the paths it takes with the servers Sluice supports. */
  static final int WIRE_VERSION = 17;
  private static final de.bwaldvogel.mongo.bson.ObjectId ELECTION = new de.bwaldvogel.mongo.bson.ObjectId();

  /**
   * Fills a handshake reply as a server Sluice supports answers it: MongoDB 6.0 (wire version 17),
   * with sessions, and the primary of a replica set (or, with {@link #reportAsMongos}, a router).
   * The stock server says it is a 4.2 standalone without sessions, and the driver then takes other
   * paths than in production: it resumes change streams by its own list of codes instead of the
   * {@code ResumableChangeStreamError} label, retries no writes, refuses snapshot reads and
   * transactions.
   */
  private void asSupportedServer(Document reply, Channel channel) {
    reply.put("maxWireVersion", WIRE_VERSION);
    reply.put("minWireVersion", 0);
    reply.put("logicalSessionTimeoutMinutes", 30);
    if (mongos) {
      reply.put("msg", "isdbgrid");
      return;
    }
    if (channel != null && channel.localAddress() instanceof java.net.InetSocketAddress local) {
      String me = local.getHostString() + ":" + local.getPort();
      reply.put("setName", REPLICA_SET);
      reply.put("setVersion", 1);
      reply.put("hosts", List.of(me));
      reply.put("primary", me);
      reply.put("me", me);
      reply.put("secondary", Boolean.FALSE);
      reply.put("electionId", ELECTION);
    }
  }

  /**
   * A read at the snapshot read concern ({@link SnapshotReads}): at the time asked, or at the newest
   * oplog entry's, read whole and copied under the read lock; the reply's cursor names the time
   * ({@code atClusterTime}), and its batches are cut as asked.
   */
  private Document snapshotRead(Channel channel, String databaseName, String command, Document query) {
    String namespace = databaseName + "." + query.get(command);
    BsonTimestamp asked = SnapshotReads.atClusterTime(query);
    BsonTimestamp[] at = new BsonTimestamp[1];
    Document whole = SnapshotReads.whole(command, query);
    Document response = isolated(command, whole, () -> {
      at[0] = SnapshotReads.readAt(oplog, namespace, asked);
      return super.handleCommand(channel, databaseName, command, whole);
    });
    if (response.get("cursor") instanceof Document cursor) {
      cursor.put("atClusterTime", at[0]);
    }
    return batches.firstBatch(response, SnapshotReads.firstBatchSize(command, query));
  }

  /**
   * What the fail point does before the command runs: waits, then drops the connection or answers
   * the error; null when the command is to run (blocked only, or with a write concern error).
   * Each connection has an event-loop thread of its own ({@link EmbeddedMongo}), so a block stalls
   * only the connection it is on, as on a real server.
   */
  private static Document fail(FailPoints.Action action, Channel channel, Document query) {
    if (action.blockMillis() > 0) {
      try {
        Thread.sleep(action.blockMillis()); // the server holding the command, not a test's synchronisation
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    if (action.closeConnection()) {
      channel.close();
      return new Document("ok", 0.0).append("errmsg", "connection closed by the failCommand fail point");
    }
    if (action.errorCode() != null) {
      return FailPoints.errorReply(action, query);
    }
    return null;
  }

  private void rememberAppName(Channel channel, Document handshake) {
    if (handshake.get("client") instanceof Document client && client.get("application") instanceof Document app
        && app.get("name") instanceof String name) {
      appNames.put(channel, name);
    }
  }

  @Override
  public void handleClose(Channel channel) {
    appNames.remove(channel);
    super.handleClose(channel);
  }

  private static final Set<String> WRITES = Set.of("insert", "update", "delete", "findandmodify", "collmod", "create",
      "drop", "dropdatabase", "createindexes", "dropindexes", "renamecollection");
  private static final Set<String> READS = Set.of("find", "getmore", "aggregate", "count", "distinct", "listcollections",
      "listindexes");

  /**
   * Runs a command as a real server isolates it (a read from a snapshot, a write with its oplog
   * entry as one unit). The stock server changes a stored document in place and hands readers the
   * stored documents themselves: {@code find}, {@code getMore} and the stages of an
   * {@code aggregate} run after the collection's own lock is released, so a read beside a write
   * could see a document half updated, or fail with error -1 "Unknown error: null" (a
   * {@code ConcurrentModificationException} inside the server). Writes hold the write lock until
   * their oplog entry is stored; reads hold the read lock until their batch is copied out of the
   * collection. Neither waits for anything else: {@code getMore} on a change stream does not block
   * here.
   */
  private Document isolated(String command, Document query, java.util.function.Supplier<Document> run) {
    String name = command.toLowerCase(java.util.Locale.ROOT);
    boolean write = WRITES.contains(name) || "aggregate".equals(name) && writesOut(query);
    if (!write && !READS.contains(name)) {
      return run.get();
    }
    java.util.concurrent.locks.Lock lock = write ? visibility.writeLock() : visibility.readLock();
    lock.lock();
    try {
      Document response = run.get();
      if (!write && response != null && response.get("cursor") instanceof Document cursor) {
        for (String batch : List.of("firstBatch", "nextBatch")) {
          if (cursor.get(batch) instanceof List<?> documents) {
            cursor.put(batch, documents.stream().map(d -> d instanceof Document doc ? doc.cloneDeeply() : d).toList());
          }
        }
      }
      return response;
    } finally {
      lock.unlock();
    }
  }

  /** Whether an aggregation ends in a stage that writes ({@code $out}, {@code $merge}). */
  private static boolean writesOut(Document query) {
    return query.get("pipeline") instanceof List<?> stages && stages.stream()
        .anyMatch(stage -> stage instanceof Document d && (d.containsKey("$out") || d.containsKey("$merge")));
  }

  /** As a real server does in every change stream batch (the stock server sends none). */
  private void addPostBatchResumeToken(Document response) {
    if (response == null || !(response.get("cursor") instanceof Document cursor)
        || !(cursor.get("id") instanceof Long id) || id == 0) {
      return;
    }
    de.bwaldvogel.mongo.backend.Cursor open;
    try {
      open = getCursorRegistry().getCursor(id);
    } catch (de.bwaldvogel.mongo.exception.CursorNotFoundException e) {
      return;
    }
    if (open instanceof FaithfulOplog.ChangeStreamCursor stream) {
      Document token = stream.postBatchToken();
      if (token != null) {
        cursor.put("postBatchResumeToken", token);
      }
    }
  }

  @Override
  public MemoryDatabase openOrCreateDatabase(String databaseName) {
    return new FaithfulDatabase(databaseName, getCursorRegistry(), withImages, clock, this::routerNow,
        () -> pipelineUpdates, shardKeys);
  }

  @Override
  @SuppressWarnings("unchecked") // the oplog collection holds documents
  protected Oplog createOplog() {
    super.createOplog(); // creates local.oplog.rs; its change events are replaced by ours
    MongoCollection<Document> entries =
        (MongoCollection<Document>) resolveDatabase("local").resolveCollection("oplog.rs", true);
    oplog = new FaithfulOplog(this, entries, getCursorRegistry(), withImages);
    return oplog;
  }

  /**
   * Drops the databases (as the stock backend does) and the oplog with its images, so that a closed
   * server that a test class still references holds no data.
   */
  @Override
  public void close() {
    super.close();
    oplog = null;
  }

  FaithfulOplog oplog() {
    if (oplog == null) {
      throw new IllegalStateException("the oplog is not enabled");
    }
    return oplog;
  }
}
