package dev.sluice.mongodb.feed;

import java.util.List;
import java.util.Objects;
import org.bson.BsonTimestamp;
import org.bson.RawBsonDocument;

/**
 * One read of a snapshot: documents in {@code _id} order, and where the read stands in the stream.
 *
 * @param documents what the read returned
 * @param low every change with a cluster time before it is in {@code documents}
 * @param high no change with a cluster time after it is; {@code null} when the source has never
 *     been written to. A read at one point of time (a snapshot read) has {@code high} just before
 *     {@code low}: nothing is in doubt. Otherwise a document changed from {@code low} through
 *     {@code high} may have been read before or after that change.
 */
record SnapshotChunk(List<RawBsonDocument> documents, BsonTimestamp low, BsonTimestamp high) {
  SnapshotChunk {
    documents = List.copyOf(documents);
    Objects.requireNonNull(low, "low");
  }
}
