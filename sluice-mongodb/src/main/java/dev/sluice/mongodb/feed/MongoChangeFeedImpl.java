package dev.sluice.mongodb.feed;

import com.mongodb.MongoException;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.SourceHistory;
import dev.sluice.feed.StartPoint;
import dev.sluice.feed.fanout.SharedReader;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;

final class MongoChangeFeedImpl implements MongoChangeFeed {

  private final CursorSettings settings;
  private final StreamSource source;
  /** Where re-snapshot requests are kept ({@code docs/adr/0067}); null: none are read. */
  private final MongoDatabase requestsDatabase;
  private final String requestsCollection;
  private final Duration requestInterval;
  /** The consumer group's requests ({@link #forGroup}); null until a group reads this feed. */
  private final SnapshotRequests requests;
  /**
   * The one cursor the partitions of the group's listener in this process read through
   * ({@code docs/adr/0074}); null until a group reads this feed, or when shared reads are off.
   */
  private final SharedReader<BsonDocument> shared;
  /** The size of snapshot reads, shared by every partition and group reading through this feed. */
  private final ChunkSizing sizing;

  MongoChangeFeedImpl(CursorSettings settings, StreamSource source) {
    this(settings, source, null, null, null, null, null);
  }

  private MongoChangeFeedImpl(CursorSettings settings, StreamSource source, MongoDatabase requestsDatabase,
      String requestsCollection, Duration requestInterval, String group, ChunkSizing sizing) {
    this.settings = settings;
    this.source = source;
    this.sizing = sizing != null ? sizing : new ChunkSizing(settings.snapshotChunkSize(), source.chunkRoundTripBound());
    this.requestsDatabase = requestsDatabase;
    this.requestsCollection = requestsCollection;
    this.requestInterval = requestInterval;
    this.requests = group == null || requestsDatabase == null ? null
        : new SnapshotRequests(requestsDatabase, requestsCollection, settings.stream(), group, requestInterval);
    this.shared = group == null || !settings.sharedReads() ? null
        : new SharedReader<>(settings.stream(), this::openStream, StreamStart::sortKey, settings.batchSize(),
            SHARED_QUEUE_BATCHES * settings.batchSize(), SHARED_TOTAL_BATCHES * settings.batchSize(),
            SHARED_WINDOW_BATCHES * settings.batchSize(), SHARED_STALL);
  }

  /** A consumer group's partitions read through the shared reader, whose cursors park. */
  @Override
  public boolean cursorsPark() {
    return shared != null;
  }

  /** Changes queued per partition, in batches, before it holds the shared reader back. */
  static final int SHARED_QUEUE_BATCHES = 4;
  /** Changes queued for all partitions together, in batches, before the reader waits for them. */
  static final int SHARED_TOTAL_BATCHES = 16;
  /** Changes of the whole stream kept, in batches, for partitions that join the shared reader behind it. */
  static final int SHARED_WINDOW_BATCHES = 10;
  /** How long a partition with a full queue may go without polling before it reads on its own. */
  static final Duration SHARED_STALL = Duration.ofSeconds(5);

  static MongoChangeFeedImpl create(MongoChangeFeed.Builder b) {
    return new MongoChangeFeedImpl(CursorSettings.of(b), new DriverStreamSource(b), b.boundedDatabase(b.database),
        b.snapshotRequests, b.snapshotRequestInterval, null, null);
  }

  /** The feed as {@code group} reads it: its cursors take up the group's re-snapshot requests. */
  @Override
  public MongoChangeFeed forGroup(String group) {
    ConfigurationException.require(group != null && !group.isBlank(), "group", group, "must not be blank");
    return new MongoChangeFeedImpl(settings, source, requestsDatabase, requestsCollection, requestInterval, group,
        sizing);
  }

  @Override
  public SnapshotRequest requestSnapshot(String group, BsonValue fromId, BsonValue toId) {
    if (requestsDatabase == null) {
      throw new IllegalStateException("this feed keeps no re-snapshot requests");
    }
    if (settings.fullDocument() == FullDocument.DEFAULT) {
      throw new ConfigurationException("MongoDB change stream '" + settings.stream() + "': cannot re-snapshot with"
          + " fullDocument default: a document changed while the snapshot reads it is delivered by its change,"
          + " which must then carry the whole document. Use fullDocument updateLookup (the feed's default),"
          + " whenAvailable or required");
    }
    String invalid = SnapshotRequests.invalid(fromId, toId);
    if (invalid != null) {
      throw new ConfigurationException("Re-snapshot of '" + settings.stream() + "': " + invalid);
    }
    return SnapshotRequests.insert(requestsDatabase, requestsCollection, settings.stream(), group, fromId, toId);
  }

  @Override
  public List<SnapshotRequest> snapshotRequests(String group) {
    if (requestsDatabase == null) {
      return List.of();
    }
    return SnapshotRequests.list(requestsDatabase, requestsCollection, settings.stream(), group);
  }

  @Override
  public String stream() {
    return settings.stream();
  }

  /**
   * Newest: the newest operation time the server reports (replica set, mongos), else its clock.
   * Oldest: the oplog's oldest entry, where it can be read (not through mongos, and only with
   * read access to the {@code local} database); otherwise unknown.
   */
  @Override
  public SourceHistory history() {
    Optional<BsonTimestamp> newestWrite;
    try {
      newestWrite = source.newestOperationTime();
    } catch (FeedException | MongoException e) {
      newestWrite = Optional.empty(); // a router without operation time; no access to the oplog
    }
    Instant newest = newestWrite.map(ts -> Instant.ofEpochSecond(ts.getTime())).orElseGet(source::serverNow);
    Instant oldest;
    try {
      oldest = source.oldestOplogTime().map(ts -> Instant.ofEpochSecond(ts.getTime())).orElse(null);
    } catch (ConfigurationException | MongoException e) {
      oldest = null;
    }
    return new SourceHistory(oldest, newest);
  }

  /**
   * Every start point; the snapshot ({@link SnapshotCursor}) only where updates carry their
   * document: a document changed while its chunk was read is left to the stream, which must then
   * deliver it whole.
   */
  @Override
  public boolean supports(StartPoint start) {
    return !(start instanceof StartPoint.Snapshot) || settings.fullDocument() != FullDocument.DEFAULT;
  }

  @Override
  public FeedCursor<BsonDocument> open(PartitionSpec partition, StartPoint start) {
    FeedCursor<BsonDocument> cursor = openCursor(partition, start);
    return requests == null ? cursor
        : new RequestedSnapshotCursor(settings, source, partition, requests, requestInterval, cursor, this::openStream, sizing);
  }

  private FeedCursor<BsonDocument> openCursor(PartitionSpec partition, StartPoint start) {
    Objects.requireNonNull(partition, "partition");
    Objects.requireNonNull(start, "start");
    if (start instanceof StartPoint.Snapshot && !supports(start)) {
      throw new FeedException("MongoDB change stream '" + settings.stream() + "': cannot start at " + start
          + " with fullDocument default: a document changed while the snapshot reads it is delivered by its"
          + " change, which must then carry the whole document. Use fullDocument updateLookup (the feed's"
          + " default), whenAvailable or required", null, false);
    }
    if (start instanceof StartPoint.Snapshot) {
      source.checkFullDocumentMode();
      // The stream starts where the first read says: every change before it is in that read.
      return new SnapshotCursor(settings, source, partition, new SnapshotProgress(null, null, SnapshotScope.ALL), null,
          sizing);
    }
    if (start instanceof StartPoint.After after && SnapshotProgress.isSnapshot(after.position())) {
      source.checkFullDocumentMode();
      SnapshotProgress progress = SnapshotProgress.fromPosition(after.position());
      if (progress.stream() != null) {
        source.checkCollection(progress.stream());
      }
      return new SnapshotCursor(settings, source, partition, progress,
          progress.stream() == null ? null : progress.stream().toPosition(after.position().time()), sizing);
    }
    if (start instanceof StartPoint.Oldest) {
      try {
        return openAt(partition, start);
      } catch (HistoryLostException e) {
        // The oldest entry can roll off a busy oplog between reading it and opening the stream;
        // the new oldest one is then the right start. A second loss is reported.
        return openAt(partition, start);
      }
    }
    return openAt(partition, start);
  }

  private FeedCursor<BsonDocument> openAt(PartitionSpec partition, StartPoint start) {
    source.checkFullDocumentMode();
    Position initial;
    if (start instanceof StartPoint.After after) {
      // A position of this feed, or a clear error now; of this collection, or refused naming both.
      source.checkCollection(StreamStart.fromPosition(after.position()));
      initial = after.position();
    } else {
      BsonTimestamp ts = bootstrapTime(start);
      initial = StreamStart.at(ts).toPosition(Instant.ofEpochSecond(ts.getTime()));
    }
    if (shared != null && partition.count() > 1) {
      return shared.join(partition, initial);
    }
    return openStream(partition, initial);
  }

  /** A cursor of the partition's own on the change stream, strictly after {@code initial}. */
  MongoFeedCursor openStream(PartitionSpec partition, Position initial) {
    MongoFeedCursor cursor = new MongoFeedCursor(settings, source, partition, initial);
    cursor.start(StreamStart.fromPosition(initial));
    return cursor;
  }

  private BsonTimestamp bootstrapTime(StartPoint start) {
    if (start instanceof StartPoint.AtTime at) {
      return StreamStart.timestampAtOrBefore(at.time());
    }
    try {
      if (start instanceof StartPoint.Oldest) {
        // An empty oplog means nothing was ever written: starting at the server's current
        // second then misses nothing either.
        return source
            .oldestOplogTime()
            .orElseGet(() -> StreamStart.timestampAtOrBefore(source.serverNow()));
      }
      // Latest: just after the newest write, so nothing written before the start is delivered;
      // when the server cannot tell, the current second (may repeat a little, never skips).
      Optional<BsonTimestamp> newest = source.newestOperationTime();
      if (newest.isPresent()) {
        return new BsonTimestamp(newest.get().getTime(), newest.get().getInc() + 1);
      }
      return StreamStart.timestampAtOrBefore(source.serverNow());
    } catch (ConfigurationException | FeedException e) {
      throw e; // says itself what happened and what to change
    } catch (RuntimeException e) {
      throw bootstrapFailed(start, e);
    }
  }

  private FeedException bootstrapFailed(StartPoint start, RuntimeException e) {
    boolean retryable =
        e instanceof MongoException m
            ? MongoFeedErrors.isRetryable(m)
            : e.getCause() instanceof MongoException c && MongoFeedErrors.isRetryable(c);
    MongoException mongo = e instanceof MongoException m ? m : e.getCause() instanceof MongoException c ? c : null;
    // Only a refusal is about read access to local; a closed connection or a failover is not.
    boolean refused = mongo instanceof com.mongodb.MongoSecurityException
        || mongo != null && mongo.getCode() == 13;
    return new FeedException(
        "MongoDB change stream '"
            + settings.stream()
            + "': cannot find the bootstrap point for "
            + start
            + (start instanceof StartPoint.Oldest && refused
                ? " (reading the oldest entry of local.oplog.rs needs read access to the"
                    + " 'local' database)"
                : "")
            + (retryable ? " (transient; tried again)" : "")
            + ": "
            + (mongo != null ? dev.sluice.mongodb.internal.MongoErrors.describe(mongo) : String.valueOf(e)),
        e,
        retryable);
  }

  @Override
  public String toString() {
    return "MongoChangeFeed[" + settings.stream() + "]";
  }
}
