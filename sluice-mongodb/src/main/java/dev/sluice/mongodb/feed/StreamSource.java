package dev.sluice.mongodb.feed;

import com.mongodb.client.MongoChangeStreamCursor;
import java.time.Instant;
import java.util.Optional;
import org.bson.BsonValue;
import org.bson.BsonTimestamp;
import org.bson.RawBsonDocument;

/**
 * What the feed needs from MongoDB. The seam where tests inject a driver-level fake cursor
 * ({@code FakeChangeStreamCursor}) for behaviour no available server produces: errors 286, 280,
 * 260, 10334, {@code invalidate}, split events.
 */
interface StreamSource {

  /** Opens the raw change stream at {@code start}; runs the initial aggregate. */
  MongoChangeStreamCursor<RawBsonDocument> open(StreamStart start);

  /** Operation time of the oldest oplog entry that is not a no-op, if the oplog has any. */
  Optional<BsonTimestamp> oldestOplogTime();

  /** The server's clock. */
  Instant serverNow();

  /**
   * The operation time of the newest write the server knows of, if it can tell: the start of
   * "latest" is just after it, so a write made before the listener started is not delivered.
   */
  default Optional<BsonTimestamp> newestOperationTime() {
    return Optional.empty();
  }

  /**
   * Refuses a full-document mode the collection cannot serve (post-images asked for where the
   * collection keeps none), naming the collection and the command that fixes it.
   */
  default void checkFullDocumentMode() {}

  /**
   * Refuses to resume at a resume token of another collection ({@code docs/adr/0087}): the
   * token's collection UUID is compared with this collection's, naming both when they differ.
   */
  default void checkCollection(StreamStart start) {}

  /**
   * Up to {@code limit} documents of the collection in {@code _id} order, those after {@code
   * afterId} (from the scope's first when null) and within {@code scope}'s range, read on the
   * primary: a chunk of a snapshot, with the stream times that bracket the read.
   */
  default SnapshotChunk readChunk(BsonValue afterId, SnapshotScope scope, int limit) {
    throw new UnsupportedOperationException("this stream source reads no snapshot");
  }

  /**
   * The bound of each round trip of {@link #readChunk} (a read of many round trips may take
   * longer in all), or null when there is none: tells whether a read was fast enough to read more
   * at once ({@link ChunkSizing}).
   */
  default java.time.Duration chunkRoundTripBound() {
    return null;
  }
}
