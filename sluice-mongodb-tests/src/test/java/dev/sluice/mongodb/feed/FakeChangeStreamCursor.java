package dev.sluice.mongodb.feed;

import com.mongodb.MongoCommandException;
import com.mongodb.ServerAddress;
import com.mongodb.ServerCursor;
import com.mongodb.client.MongoChangeStreamCursor;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.NoSuchElementException;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonString;
import org.bson.BsonTimestamp;
import org.bson.RawBsonDocument;

/**
 * A FAKE of the driver's change stream cursor, for what no server available here produces:
 * errors 286/280/260/10334, {@code invalidate}, split large events, post-batch resume tokens,
 * network failures. It plays a script: each {@link #tryNext()} takes the next step (an event, an
 * empty getMore, or an exception). An exhausted script behaves as an idle stream.
 */
final class FakeChangeStreamCursor implements MongoChangeStreamCursor<RawBsonDocument> {

  private sealed interface Step permits Event, Empty, Held, Failure {}

  /** An idle getMore the server held for its maxAwaitTimeMS, as a real server does. */
  private record Held(java.time.Duration await) implements Step {}

  private record Event(BsonDocument event) implements Step {}

  private record Empty(BsonDocument postBatchToken) implements Step {}

  private record Failure(RuntimeException error) implements Step {}

  private final Deque<Step> script = new ArrayDeque<>();
  private BsonDocument resumeToken;
  private boolean closed;

  FakeChangeStreamCursor event(BsonDocument event) {
    script.add(new Event(event));
    return this;
  }

  FakeChangeStreamCursor emptyBatch(BsonDocument postBatchToken) {
    script.add(new Empty(postBatchToken));
    return this;
  }

  /** An empty getMore answered only after {@code await}: a real server holding an idle read. */
  FakeChangeStreamCursor heldEmpty(java.time.Duration await) {
    script.add(new Held(await));
    return this;
  }

  FakeChangeStreamCursor fail(RuntimeException error) {
    script.add(new Failure(error));
    return this;
  }

  boolean closed() {
    return closed;
  }

  static BsonDocument token(int n) {
    return new BsonDocument("_data", new BsonString(String.format("82%014d", n)));
  }

  /** A change event as a real server sends it. */
  static BsonDocument change(int n, String operationType, String id) {
    BsonDocument e =
        new BsonDocument("_id", token(n))
            .append("operationType", new BsonString(operationType))
            .append("clusterTime", new BsonTimestamp(1_700_000_000 + n, 1))
            .append("ns", new BsonDocument("db", new BsonString("d")).append("coll", new BsonString("c")));
    if (id != null) {
      e.append("documentKey", new BsonDocument("_id", new BsonString(id)));
      if (!operationType.equals("delete")) {
        e.append(
            "fullDocument",
            new BsonDocument("_id", new BsonString(id)).append("n", new BsonInt32(n)));
      }
      if (operationType.equals("update")) { // a real server describes every update
        e.append("updateDescription", new BsonDocument("updatedFields", new BsonDocument("n", new BsonInt32(n)))
            .append("removedFields", new org.bson.BsonArray()));
      }
    }
    return e;
  }

  static MongoCommandException serverError(int code, String codeName) {
    return new MongoCommandException(
        new BsonDocument("ok", new BsonInt32(0))
            .append("code", new BsonInt32(code))
            .append("codeName", new BsonString(codeName))
            .append("errmsg", new BsonString("fake server error " + codeName)),
        new ServerAddress("fake-replica", 27017));
  }

  @Override
  public RawBsonDocument tryNext() {
    if (closed) {
      throw new IllegalStateException("tryNext on a closed cursor");
    }
    Step step = script.poll();
    if (step == null) {
      return null;
    }
    if (step instanceof Failure f) {
      throw f.error();
    }
    if (step instanceof Held h) {
      // The server's side of maxAwaitTimeMS: it answers when the time is up.
      java.util.concurrent.locks.LockSupport.parkNanos(h.await().toNanos());
      return null;
    }
    if (step instanceof Empty e) {
      if (e.postBatchToken() != null) {
        resumeToken = e.postBatchToken();
      }
      return null;
    }
    BsonDocument event = ((Event) step).event();
    if (event.isDocument("_id")) {
      resumeToken = event.getDocument("_id");
    }
    return RawBsonDocument.parse(event.toJson());
  }

  @Override
  public BsonDocument getResumeToken() {
    return resumeToken;
  }

  @Override
  public void close() {
    closed = true;
  }

  @Override
  public boolean hasNext() {
    return !script.isEmpty();
  }

  @Override
  public RawBsonDocument next() {
    RawBsonDocument d = tryNext();
    if (d == null) {
      throw new NoSuchElementException();
    }
    return d;
  }

  @Override
  public int available() {
    return script.size();
  }

  @Override
  public ServerCursor getServerCursor() {
    return null;
  }

  @Override
  public ServerAddress getServerAddress() {
    return new ServerAddress("fake-replica", 27017);
  }
}
