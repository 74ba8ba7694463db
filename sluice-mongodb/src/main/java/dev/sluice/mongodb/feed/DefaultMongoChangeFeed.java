package dev.sluice.mongodb.feed;

import com.mongodb.MongoException;
import com.mongodb.client.model.changestream.FullDocument;
import dev.sluice.ConfigurationException;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;

final class DefaultMongoChangeFeed implements MongoChangeFeed {

  private final String stream;
  private final StreamSource source;
  private final int batchSize;
  private final Duration minBackoff;
  private final Duration maxBackoff;
  private final boolean splitLargeEvents;
  private final FullDocument fullDocument;
  private final MongoChangeFeed.OnInvalidate onInvalidate;

  DefaultMongoChangeFeed(
      String stream,
      StreamSource source,
      int batchSize,
      Duration minBackoff,
      Duration maxBackoff,
      boolean splitLargeEvents) {
    this(stream, source, batchSize, minBackoff, maxBackoff, splitLargeEvents, FullDocument.UPDATE_LOOKUP,
        MongoChangeFeed.OnInvalidate.STOP);
  }

  DefaultMongoChangeFeed(
      String stream,
      StreamSource source,
      int batchSize,
      Duration minBackoff,
      Duration maxBackoff,
      boolean splitLargeEvents,
      FullDocument fullDocument,
      MongoChangeFeed.OnInvalidate onInvalidate) {
    this.fullDocument = fullDocument;
    this.onInvalidate = onInvalidate;
    this.stream = stream;
    this.source = source;
    this.batchSize = batchSize;
    this.minBackoff = minBackoff;
    this.maxBackoff = maxBackoff;
    this.splitLargeEvents = splitLargeEvents;
  }

  static DefaultMongoChangeFeed create(MongoChangeFeed.Builder b) {
    return new DefaultMongoChangeFeed(
        b.stream,
        new DriverStreamSource(b),
        b.batchSize,
        b.minBackoff,
        b.maxBackoff,
        b.splitLargeEvents,
        b.fullDocument,
        b.onInvalidate);
  }

  @Override
  public String stream() {
    return stream;
  }

  @Override
  public FeedCursor<BsonDocument> open(PartitionSpec partition, StartPoint start) {
    Objects.requireNonNull(partition, "partition");
    Objects.requireNonNull(start, "start");
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
    StreamStart streamStart;
    Position initial;
    if (start instanceof StartPoint.After after) {
      streamStart = StreamStart.fromPosition(after.position());
      initial = after.position();
    } else {
      BsonTimestamp ts = bootstrapTime(start);
      streamStart = StreamStart.at(ts);
      initial = streamStart.toPosition(Instant.ofEpochSecond(ts.getTime()));
    }
    MongoFeedCursor cursor =
        new MongoFeedCursor(
            stream, source, partition, initial, batchSize, minBackoff, maxBackoff,
            splitLargeEvents, fullDocument, onInvalidate);
    cursor.start(streamStart);
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
      boolean retryable =
          e instanceof MongoException m
              ? MongoFeedErrors.isRetryable(m)
              : e.getCause() instanceof MongoException c && MongoFeedErrors.isRetryable(c);
      throw new FeedException(
          "MongoDB change stream '"
              + stream
              + "': cannot find the bootstrap point for "
              + start
              + (start instanceof StartPoint.Oldest
                  ? " (reading the oldest entry of local.oplog.rs needs read access to the"
                      + " 'local' database)"
                  : "")
              + ": "
              + e.getMessage(),
          e,
          retryable);
    }
  }

  @Override
  public String toString() {
    return "MongoChangeFeed[" + stream + "]";
  }
}
