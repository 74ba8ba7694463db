package dev.sluice.mongodb.feed;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.changestream.FullDocument;
import com.mongodb.client.model.changestream.FullDocumentBeforeChange;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.ChangeFeed;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.bson.conversions.Bson;

/**
 * The change feed of one MongoDB collection (a collection-level change stream), for MongoDB 5.0+
 * replica sets and sharded clusters. See {@code docs/adr/0012-mongodb-change-feed.md}.
 *
 * <ul>
 *   <li>Positions are change stream resume tokens, or an operation time before the first change
 *       (so a bootstrap point can be committed and resumed from). {@code Position.time} is the
 *       change's cluster time.
 *   <li>{@code Snapshot} reads every existing document in {@code _id} order as {@code SNAPSHOT}
 *       changes, chunk by chunk, resumable after the last committed one, then streams from an
 *       operation time taken before the first read, leaving out the changes the reads already
 *       hold ({@code docs/adr/0066-mongodb-snapshot-bootstrap.md}).
 *   <li>{@code Oldest} starts at the oldest entry of {@code local.oplog.rs} (needs read access to
 *       the {@code local} database), so that no write made before the listener first started is
 *       missed (docs/adr/0005).
 *   <li>Partitions are client-side: every partition's cursor reads the whole stream and keeps the
 *       changes whose key it owns. The key is the canonical string of the document's {@code _id}
 *       ({@link #keyOf(BsonValue)}).
 *   <li>Error 286 becomes {@link dev.sluice.feed.HistoryLostException}; 280 and 260 (the resume
 *       token is not one of this stream's: a checkpoint of another collection or deployment)
 *       stop the cursor with a non-retryable {@link dev.sluice.feed.FeedException} naming the
 *       stream and the position, whatever the history-lost policy; an {@code
 *       invalidate} event ends the cursor; 136 (the oplog rolled past an open cursor's position)
 *       is history lost too; 47 (a {@code required} image missing) is handled per {@link
 *       Builder#onMissingImage}; an event larger than 16 MB, or one without a resume
 *       token, stops the cursor with a non-retryable {@link dev.sluice.feed.FeedException}
 *       naming the position. A change that has a position but cannot be decoded is handed on
 *       with a {@link dev.sluice.feed.UndecodableChange} as its raw event, for the engine's
 *       failure policy.
 * </ul>
 *
 * <pre>{@code
 * ChangeFeed<BsonDocument> feed = MongoChangeFeed.builder(client, "shop", "orders").build();
 * }</pre>
 */
public interface MongoChangeFeed extends ChangeFeed<BsonDocument> {

  /** Default largest number of changes one poll returns, also the driver's batch size. */
  int DEFAULT_BATCH_SIZE = 500;

  /** Default of {@link Builder#snapshotChunkSize}. */
  int DEFAULT_SNAPSHOT_CHUNK_SIZE = 1000;

  /** Default of {@link Builder#snapshotRequests}: the collection of re-snapshot requests. */
  String DEFAULT_SNAPSHOT_REQUESTS = "sluice_snapshot_requests";

  /** Default of {@link Builder#snapshotRequestInterval}. */
  Duration DEFAULT_SNAPSHOT_REQUEST_INTERVAL = Duration.ofSeconds(5);

  /** Default of {@link Builder#serverAwait}, in milliseconds. */
  long DEFAULT_SERVER_AWAIT_MILLIS = 1000;

  /** Default of {@link Builder#serverAwait}. */
  Duration DEFAULT_SERVER_AWAIT = Duration.ofMillis(DEFAULT_SERVER_AWAIT_MILLIS);

  /** Default of {@link Builder#operationTimeout}, in seconds. */
  long DEFAULT_OPERATION_TIMEOUT_SECONDS = 10;

  /**
   * Default of {@link Builder#operationTimeout} when the client and database carry no
   * {@code timeoutMS} of their own (docs/adr/0102).
   */
  Duration DEFAULT_OPERATION_TIMEOUT = Duration.ofSeconds(DEFAULT_OPERATION_TIMEOUT_SECONDS);

  /** Starts a builder for the change stream of {@code database.collection}. */
  static Builder builder(MongoClient client, String database, String collection) {
    return new Builder(client, database, collection);
  }

  /** Default of {@link #maxPartitions()}. */
  int MAX_PARTITIONS = 1_024;

  /**
   * {@value #MAX_PARTITIONS}: partitions filter on the client; with {@link Builder#sharedReads} (the
   * default) the partitions one process holds read the stream through one cursor, and wait for it
   * without a thread (ADR 0075).
   */
  @Override
  default int maxPartitions() {
    return MAX_PARTITIONS;
  }

  /** The feed as consumer group {@code group} reads it: its cursors take up the group's re-snapshot requests. */
  @Override
  MongoChangeFeed forGroup(String group);

  /**
   * Asks consumer group {@code group}'s partitions of this stream to read again, while they stream
   * on, the documents with {@code _id} from {@code fromId} through {@code toId} (inclusive, in
   * MongoDB's sort order; null: unbounded) as {@code SNAPSHOT} changes ({@code docs/adr/0067}):
   * DBLog's watermark algorithm, as in the snapshot bootstrap, so that no key goes back to an older
   * state. Writes a request document ({@link Builder#snapshotRequests}); each partition takes it up
   * within {@link Builder#snapshotRequestInterval} once it streams (after any snapshot under way,
   * and the group's earlier requests), resumes it after a restart from the last committed
   * document, and records in it when it has read its last chunk ({@link #snapshotRequests}).
   *
   * @throws dev.sluice.ConfigurationException if the feed cannot snapshot (fullDocument default)
   *     or a bound is not an {@code _id} value
   */
  SnapshotRequest requestSnapshot(String group, BsonValue fromId, BsonValue toId);

  /** The re-snapshot requests of {@code group} on this stream, oldest first, with each partition's progress. */
  List<SnapshotRequest> snapshotRequests(String group);

  /**
   * The canonical key string of a document {@code _id}: the value itself for strings, the hex
   * string for ObjectIds, the decimal for integers, canonical extended JSON for anything else.
   * Stable across JVMs and driver versions, so partitioning and per-key ordering are too.
   * Distinct ids of different types can share a key (string {@code "1"} and integer 1); they are
   * then merely ordered together.
   */
  static String keyOf(BsonValue id) {
    return MongoEvents.keyOf(id);
  }

  /**
   * What a partition does when its collection is dropped, renamed or replaced by {@code $out}. The
   * {@code drop} / {@code rename} change before the invalidate always reaches the handler
   * ({@code Operation.OTHER}).
   */
  enum OnInvalidate {
    /**
     * The partition ends with a status naming what happened, the position, and how to continue;
     * nothing after the invalidate is read, and every restart ends there again until the policy
     * is changed.
     */
    STOP,
    /**
     * The partition goes on after the invalidate ({@code startAfter} its token; that is carried in
     * the checkpoint, so a restart goes on there too): for a collection that is dropped and created
     * again, or rebuilt with {@code $out}, and read on as one stream.
     */
    START_AFTER
  }

  /**
   * What a partition does with a change whose {@code required} pre- or post-image the server does
   * not have ({@link Builder#fullDocument} or {@link Builder#fullDocumentBeforeChange} {@code
   * REQUIRED}; error 47 NoMatchingDocument): the image expired ({@code
   * changeStreamOptions.preAndPostImages.expireAfterSeconds}, a cluster parameter) or was never
   * recorded (images enabled on the collection after the change). {@code docs/adr/0082}.
   */
  enum OnMissingImage {
    /**
     * The partition stops (FAILED) naming the change's position, {@code expireAfterSeconds} and the
     * remedies; nothing is skipped, and every restart stops there again until the policy is changed.
     */
    STOP,
    /**
     * The change is handed on as an undecodable change (its raw event in a {@link
     * dev.sluice.feed.UndecodableChange}, with the reason "pre-image missing (expired or never
     * recorded)"), which the listener's failure policy parks in the dead-letter store, with every
     * later change of its key; other keys go on, and the stream continues in {@code required}
     * mode after it. Under a blocking failure policy the partition blocks on it instead.
     */
    PARK
  }

  /** Configures a {@link MongoChangeFeed}. */
  final class Builder {
    final MongoClient client;
    final String database;
    final String collection;
    String stream;
    int batchSize = DEFAULT_BATCH_SIZE;
    FullDocument fullDocument = FullDocument.UPDATE_LOOKUP;
    FullDocumentBeforeChange fullDocumentBeforeChange = FullDocumentBeforeChange.OFF;
    OnInvalidate onInvalidate = OnInvalidate.STOP;
    OnMissingImage onMissingImage = OnMissingImage.STOP;
    final List<Bson> pipeline = new ArrayList<>();
    Duration minBackoff = Duration.ofMillis(10);
    Duration maxBackoff = Duration.ofMillis(200);
    Duration serverAwait = DEFAULT_SERVER_AWAIT;
    boolean splitLargeEvents;
    boolean sharedReads = true;
    int snapshotChunkSize = DEFAULT_SNAPSHOT_CHUNK_SIZE;
    String snapshotRequests = DEFAULT_SNAPSHOT_REQUESTS;
    Duration snapshotRequestInterval = DEFAULT_SNAPSHOT_REQUEST_INTERVAL;
    /** Null: the client's or database's {@code timeoutMS}, else {@link #DEFAULT_OPERATION_TIMEOUT}. */
    Duration operationTimeout;

    private Builder(MongoClient client, String database, String collection) {
      this.client = ConfigurationException.requireNonNull(client, "client");
      ConfigurationException.require(
          database != null && !database.isBlank(), "database", database, "must not be blank");
      ConfigurationException.require(
          collection != null && !collection.isBlank(),
          "collection",
          collection,
          "must not be blank");
      this.database = database;
      this.collection = collection;
      this.stream = database + "." + collection;
    }

    /** The stream name in lease names and checkpoints; default {@code database.collection}. */
    public Builder streamName(String name) {
      ConfigurationException.require(
          name != null && !name.isBlank() && !name.contains("#"),
          "streamName",
          name,
          "must be non-blank and must not contain '#'");
      this.stream = name;
      return this;
    }

    /** Largest number of changes per poll and the driver's batch size; default 500. */
    public Builder batchSize(int size) {
      ConfigurationException.require(
          size >= 1 && size <= 100_000, "batchSize", size, "must be in [1, 100000]");
      this.batchSize = size;
      return this;
    }

    /**
     * Full-document mode; default {@link FullDocument#UPDATE_LOOKUP}: an update's document is the
     * one read when the change is read (labelled {@code DocumentState.CURRENT}: possibly later,
     * null once deleted), and what the update itself set is in {@code changedFields}.
     * {@link FullDocument#WHEN_AVAILABLE} / {@link FullDocument#REQUIRED} read each update's own
     * post-image (MongoDB 6.0+); opening refuses a collection without
     * {@code changeStreamPreAndPostImages}, naming the {@code collMod} command that enables it.
     */
    public Builder fullDocument(FullDocument mode) {
      this.fullDocument = ConfigurationException.requireNonNull(mode, "fullDocument");
      return this;
    }

    /**
     * Pre-images (MongoDB 6.0+): with {@link FullDocumentBeforeChange#WHEN_AVAILABLE} or {@link
     * FullDocumentBeforeChange#REQUIRED}, updates, replacements and deletes carry the document as
     * it was before them in {@code ChangeEvent.before()} (and the sinks' envelope in {@code
     * before}). Default {@link FullDocumentBeforeChange#OFF}. Opening refuses a collection without
     * {@code changeStreamPreAndPostImages}, naming the {@code collMod} command that enables it;
     * with {@code REQUIRED}, a change whose pre-image the server no longer has (expired, or written
     * before images were enabled) is handled per {@link #onMissingImage}.
     */
    public Builder fullDocumentBeforeChange(FullDocumentBeforeChange mode) {
      ConfigurationException.requireNonNull(mode, "fullDocumentBeforeChange");
      ConfigurationException.require(mode != FullDocumentBeforeChange.DEFAULT, "fullDocumentBeforeChange", mode,
          "must be OFF, WHEN_AVAILABLE or REQUIRED");
      this.fullDocumentBeforeChange = mode;
      return this;
    }

    /**
     * What happens when the collection is dropped, renamed or replaced by {@code $out} (the server
     * sends {@code invalidate} and ends every stream on it); default {@link OnInvalidate#STOP}.
     */
    public Builder onInvalidate(OnInvalidate policy) {
      this.onInvalidate = ConfigurationException.requireNonNull(policy, "onInvalidate");
      return this;
    }

    /**
     * What happens with a change whose {@code required} pre- or post-image the server does not have
     * (expired, or never recorded); default {@link OnMissingImage#STOP}. Only matters with {@link
     * #fullDocument} or {@link #fullDocumentBeforeChange} {@code REQUIRED}.
     */
    public Builder onMissingImage(OnMissingImage policy) {
      this.onMissingImage = ConfigurationException.requireNonNull(policy, "onMissingImage");
      return this;
    }

    /**
     * Extra stages appended to the change stream pipeline, typically a {@code $match} on {@code
     * operationType} or on fields of {@code fullDocument}. Changes they filter out never reach
     * any partition.
     */
    public Builder pipeline(List<? extends Bson> stages) {
      ConfigurationException.requireNonNull(stages, "pipeline");
      for (Bson s : stages) {
        ConfigurationException.requireNonNull(s, "pipeline stage");
      }
      this.pipeline.clear();
      this.pipeline.addAll(stages);
      return this;
    }

    /**
     * How long the server holds an idle getMore before answering that nothing happened
     * ({@code maxAwaitTimeMS}); it answers as soon as a change arrives, so this costs no
     * latency. Default {@value #DEFAULT_SERVER_AWAIT_MILLIS} ms: one read per second per idle
     * partition. While a getMore is held, the partition's read returns up to this long after the
     * engine's {@code pollWait}; closing and losing the lease never wait for it.
     */
    public Builder serverAwait(Duration await) {
      ConfigurationException.requireNonNull(await, "serverAwait");
      ConfigurationException.require(
          await.toMillis() >= 1 && await.compareTo(Duration.ofMinutes(1)) <= 0, "serverAwait", await,
          "must be between 1 ms and 1 minute");
      this.serverAwait = await;
      return this;
    }

    /**
     * Back-off between empty getMores that a server answered at once without waiting (servers
     * that ignore {@code maxAwaitTimeMS}, such as the embedded test server), within one {@link
     * dev.sluice.feed.FeedCursor#poll} call: starts at {@code min}, doubles up to {@code max},
     * resets when a change arrives. Defaults 10 ms and 200 ms. A server that waited as asked
     * ({@link #serverAwait}) is asked again at once.
     */
    public Builder pollBackoff(Duration min, Duration max) {
      ConfigurationException.requireNonNull(min, "pollBackoff.min");
      ConfigurationException.requireNonNull(max, "pollBackoff.max");
      ConfigurationException.require(
          min.toMillis() >= 1, "pollBackoff.min", min, "must be at least 1 ms");
      ConfigurationException.require(
          max.compareTo(min) >= 0, "pollBackoff.max", max, "must be >= pollBackoff.min " + min);
      this.minBackoff = min;
      this.maxBackoff = max;
      return this;
    }

    /**
     * Whether the partitions of one listener in this process read the change stream through one
     * shared cursor ({@code docs/adr/0074-one-reader-per-process.md}): the server then serves
     * one cursor per process instead of one per partition, and each change is read and decoded
     * once. Default true. False gives every partition a cursor of its own, as before: only worth
     * it when partitions of one process must not hold each other back at all (a partition whose
     * queue is full holds the shared reader back while it still takes changes).
     */
    public Builder sharedReads(boolean shared) {
      this.sharedReads = shared;
      return this;
    }

    /**
     * Whether to add {@code $changeStreamSplitLargeEvent} (MongoDB 7.0+; 6.0.9+) as the last
     * pipeline stage and reassemble the fragments of events larger than 16 MB into one change.
     * Default false: such an event then stops the cursor with a clear error.
     */
    public Builder splitLargeEvents(boolean split) {
      this.splitLargeEvents = split;
      return this;
    }

    /**
     * How many documents one read of a snapshot bootstrap ({@code StartPoint.snapshot()}) returns
     * at most; the snapshot's progress is committed per document, so a restart reads at most the
     * rest of one chunk again. Default {@value #DEFAULT_SNAPSHOT_CHUNK_SIZE}.
     */
    public Builder snapshotChunkSize(int size) {
      ConfigurationException.require(
          size >= 1 && size <= 100_000, "snapshotChunkSize", size, "must be in [1, 100000]");
      this.snapshotChunkSize = size;
      return this;
    }

    /**
     * The collection, in the stream's database, of re-snapshot requests ({@link
     * MongoChangeFeed#requestSnapshot}); default {@value MongoChangeFeed#DEFAULT_SNAPSHOT_REQUESTS}.
     * A listener's partitions read it (at most once per {@link #snapshotRequestInterval} per
     * process and group) and write their progress to it.
     */
    public Builder snapshotRequests(String collection) {
      ConfigurationException.require(collection != null && !collection.isBlank() && !collection.contains("$"),
          "snapshotRequests", collection, "must be a collection name");
      this.snapshotRequests = collection;
      return this;
    }

    /**
     * How often a streaming partition looks for a re-snapshot request; default 5 seconds (one read
     * of {@link #snapshotRequests} per interval, per process and consumer group).
     */
    public Builder snapshotRequestInterval(Duration interval) {
      ConfigurationException.requireNonNull(interval, "snapshotRequestInterval");
      ConfigurationException.require(interval.toMillis() >= 100 && interval.compareTo(Duration.ofHours(1)) <= 0,
          "snapshotRequestInterval", interval, "must be between 100 ms and 1 hour");
      this.snapshotRequestInterval = interval;
      return this;
    }

    /**
     * The bound of each call the feed makes to the server (docs/adr/0102): each read of the change
     * stream (one {@code getMore}, or the {@code aggregate} that opens it, server selection and
     * connecting included), each round trip of a snapshot chunk, each {@code hello} or oplog read.
     * It is the driver's client-side operation timeout ({@code timeoutMS}), so a server that keeps
     * the connection open and stops answering (a half-open connection, a partition that drops
     * packets) fails the call with {@code MongoOperationTimeoutException} after this long instead
     * of holding the partition's thread for ever: the partition is then {@code RETRYING} and opens
     * the stream again at its checkpoint on a fresh connection. Default: the {@code timeoutMS} of
     * the client or database, else {@value #DEFAULT_OPERATION_TIMEOUT_SECONDS} s. Must be longer
     * than {@link #serverAwait}, which an idle read waits on the server.
     */
    public Builder operationTimeout(Duration timeout) {
      ConfigurationException.requireNonNull(timeout, "operationTimeout");
      ConfigurationException.require(timeout.toMillis() >= 1 && timeout.compareTo(Duration.ofHours(1)) <= 0,
          "operationTimeout", timeout, "must be between 1 ms and 1 hour");
      this.operationTimeout = timeout;
      return this;
    }

    /**
     * The stream's database with the feed's bound: {@link #operationTimeout} if set, else the
     * client's or database's own {@code timeoutMS} (0, no bound, if the application asked for
     * it), else {@link #DEFAULT_OPERATION_TIMEOUT}.
     */
    MongoDatabase boundedDatabase(String name) {
      MongoDatabase db = client.getDatabase(name);
      Long own = db.getTimeout(TimeUnit.MILLISECONDS);
      long millis = operationTimeout != null ? operationTimeout.toMillis()
          : own != null ? own : DEFAULT_OPERATION_TIMEOUT.toMillis();
      return own != null && own == millis ? db : db.withTimeout(millis, TimeUnit.MILLISECONDS);
    }

    public MongoChangeFeed build() {
      Long timeout = boundedDatabase(database).getTimeout(TimeUnit.MILLISECONDS);
      // The driver refuses a change stream whose maxAwaitTimeMS is not below its timeoutMS; said here,
      // naming both settings, instead of at the first read.
      ConfigurationException.require(timeout == 0 || serverAwait.toMillis() < timeout, "serverAwait", serverAwait,
          "must be shorter than the feed's operation timeout " + Duration.ofMillis(timeout)
              + " (operationTimeout, or the client's timeoutMS)");
      return MongoChangeFeedImpl.create(this);
    }
  }
}
