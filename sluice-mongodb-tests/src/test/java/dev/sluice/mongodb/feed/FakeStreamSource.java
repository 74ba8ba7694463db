package dev.sluice.mongodb.feed;

import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Optional;
import org.bson.BsonTimestamp;
import org.bson.RawBsonDocument;
import com.mongodb.client.MongoChangeStreamCursor;

/** A FAKE stream source handing out scripted {@link FakeChangeStreamCursor}s. */
final class FakeStreamSource implements StreamSource {

  final Deque<Object> opens = new ArrayDeque<>();
  final List<StreamStart> openedAt = new ArrayList<>();
  BsonTimestamp oldest = new BsonTimestamp(1_600_000_000, 1);

  /** The settings the fake-cursor tests open their feeds with: short back-offs, updateLookup, STOP. */
  static CursorSettings settings(String stream, boolean splitLargeEvents) {
    return settings(stream, splitLargeEvents, MongoChangeFeed.OnInvalidate.STOP);
  }

  static CursorSettings settings(String stream, boolean splitLargeEvents, MongoChangeFeed.OnInvalidate onInvalidate) {
    return new CursorSettings(stream, 100, java.time.Duration.ofMillis(1), java.time.Duration.ofMillis(2),
        MongoChangeFeed.DEFAULT_SERVER_AWAIT, splitLargeEvents, com.mongodb.client.model.changestream.FullDocument.UPDATE_LOOKUP,
        com.mongodb.client.model.changestream.FullDocumentBeforeChange.OFF, onInvalidate, MongoChangeFeed.OnMissingImage.STOP,
        MongoChangeFeed.DEFAULT_SNAPSHOT_CHUNK_SIZE, true);
  }

  FakeStreamSource willOpen(FakeChangeStreamCursor cursor) {
    opens.add(cursor);
    return this;
  }

  FakeStreamSource willFailToOpen(RuntimeException error) {
    opens.add(error);
    return this;
  }

  @Override
  public MongoChangeStreamCursor<RawBsonDocument> open(StreamStart start) {
    openedAt.add(start);
    Object next = opens.poll();
    if (next instanceof RuntimeException e) {
      throw e;
    }
    if (next == null) {
      throw new IllegalStateException("the test scripted no further open()");
    }
    return (FakeChangeStreamCursor) next;
  }

  @Override
  public Optional<BsonTimestamp> oldestOplogTime() {
    return Optional.ofNullable(oldest);
  }

  @Override
  public Instant serverNow() {
    return Instant.ofEpochSecond(1_800_000_000);
  }
}
