package dev.sluice.mongodb.feed;

import static com.mongodb.client.model.Filters.ne;

import com.mongodb.client.ChangeStreamIterable;
import com.mongodb.client.MongoChangeStreamCursor;
import com.mongodb.client.MongoCursor;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.Sorts;
import dev.sluice.mongodb.internal.MongoServerTime;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.bson.BsonDocument;
import org.bson.BsonTimestamp;
import org.bson.BsonValue;
import org.bson.RawBsonDocument;
import org.bson.conversions.Bson;

/** The real {@link StreamSource}: the official driver. */
final class DriverStreamSource implements StreamSource {

  private final MongoChangeFeed.Builder settings;
  private final List<Bson> pipeline;

  DriverStreamSource(MongoChangeFeed.Builder settings) {
    this.settings = settings;
    List<Bson> stages = new ArrayList<>(settings.pipeline);
    if (settings.splitLargeEvents) {
      // Must be the last stage of the pipeline.
      stages.add(new BsonDocument("$changeStreamSplitLargeEvent", new BsonDocument()));
    }
    this.pipeline = List.copyOf(stages);
  }

  @Override
  public MongoChangeStreamCursor<RawBsonDocument> open(StreamStart start) {
    ChangeStreamIterable<BsonDocument> stream =
        settings
            .client
            .getDatabase(settings.database)
            .getCollection(settings.collection, BsonDocument.class)
            .watch(pipeline, BsonDocument.class)
            .batchSize(settings.batchSize)
            .fullDocument(settings.fullDocument)
            // Each tryNext is one getMore; a real server holds an idle one this long. Kept at
            // the shortest back-off so that poll(maxWait) never overruns maxWait by more than
            // that; the back-off between empty getMores bounds the load instead.
            .maxAwaitTime(settings.minBackoff.toMillis(), TimeUnit.MILLISECONDS);
    stream =
        start.resumeAfter() != null
            ? stream.resumeAfter(start.resumeAfter())
            : stream.startAtOperationTime(start.startAtOperationTime());
    // Raw events: decoding happens in MongoFeedCursor, so an undecodable event becomes an error
    // naming its position instead of a codec exception deep inside the driver, and split event
    // fragments can be merged.
    MongoCursor<RawBsonDocument> cursor = stream.withDocumentClass(RawBsonDocument.class).cursor();
    if (cursor instanceof MongoChangeStreamCursor<RawBsonDocument> changeStreamCursor) {
      return changeStreamCursor;
    }
    cursor.close();
    throw new IllegalStateException(
        "MongoDB driver returned " + cursor.getClass() + " for a change stream; expected a "
            + "MongoChangeStreamCursor (driver version mismatch?)");
  }

  @Override
  public Optional<BsonTimestamp> oldestOplogTime() {
    // Sorted by ts rather than $natural: identical on a real oplog (it is in ts order) and the
    // embedded server honours only ts.
    BsonDocument first =
        settings
            .client
            .getDatabase("local")
            .getCollection("oplog.rs", BsonDocument.class)
            .find(ne("op", "n"))
            .projection(Projections.include("ts"))
            .sort(Sorts.ascending("ts"))
            .limit(1)
            .first();
    if (first == null) {
      return Optional.empty();
    }
    BsonValue ts = first.get("ts");
    return ts != null && ts.isTimestamp() ? Optional.of(ts.asTimestamp()) : Optional.empty();
  }

  @Override
  public Instant serverNow() {
    return MongoServerTime.now(settings.client.getDatabase(settings.database));
  }
}
