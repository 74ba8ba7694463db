package dev.sluice.testkit.mongo;

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.Cursor;
import de.bwaldvogel.mongo.backend.aggregation.Aggregation;
import de.bwaldvogel.mongo.bson.BsonTimestamp;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.MongoServerError;
import de.bwaldvogel.mongo.oplog.Oplog;
import java.util.ArrayList;
import java.util.List;

/**
 * The embedded server's oplog with the one thing a real replica set's capped oplog does and the
 * embedded one does not: losing history. {@link #trimBefore} deletes old entries; opening a
 * change stream at a point before the retained history then fails with error 286
 * (ChangeStreamHistoryLost), as on a real server, instead of silently skipping the lost changes.
 *
 * <p>Only the resume check at open is modelled; a cursor that is already open when entries are
 * trimmed under it is not failed (a real server would fail its next getMore).
 */
final class TrimmingOplog implements Oplog {

  private final Oplog delegate;
  private final MongoCollection<Document> entries;
  private volatile BsonTimestamp trimmedThrough;

  TrimmingOplog(Oplog delegate, MongoCollection<Document> entries) {
    this.delegate = delegate;
    this.entries = entries;
  }

  /** Deletes every entry older than {@code ts}; returns how many. */
  synchronized int trimBefore(BsonTimestamp ts) {
    List<Document> old = new ArrayList<>();
    for (Document entry : entries.queryAll()) {
      Object entryTs = entry.get("ts");
      if (entryTs instanceof BsonTimestamp t && t.compareTo(ts) < 0) {
        old.add(entry);
      }
    }
    BsonTimestamp newest = trimmedThrough;
    for (Document entry : old) {
      entries.removeDocument(entry);
      BsonTimestamp t = (BsonTimestamp) entry.get("ts");
      if (newest == null || t.compareTo(newest) > 0) {
        newest = t;
      }
    }
    trimmedThrough = newest;
    return old.size();
  }

  @Override
  public Cursor createCursor(Document changeStream, String namespace, Aggregation aggregation) {
    BsonTimestamp trimmed = trimmedThrough;
    if (trimmed != null) {
      Object token = changeStream.get("resumeAfter");
      if (token == null) {
        token = changeStream.get("startAfter");
      }
      // The embedded server's resume token data is the hex of the entry's timestamp.
      if (token instanceof Document d && d.get("_data") instanceof String hex) {
        BsonTimestamp after = new BsonTimestamp(Long.parseUnsignedLong(hex, 16));
        if (after.compareTo(trimmed) < 0) {
          throw historyLost();
        }
      }
      if (changeStream.get("startAtOperationTime") instanceof BsonTimestamp at
          && at.compareTo(trimmed) <= 0) {
        throw historyLost();
      }
    }
    return delegate.createCursor(changeStream, namespace, aggregation);
  }

  private static MongoServerError historyLost() {
    return new MongoServerError(
        286,
        "ChangeStreamHistoryLost",
        "Resume of change stream was not possible, as the resume point may no longer be in the"
            + " oplog.");
  }

  @Override
  public void handleInsert(String namespace, List<Document> documents) {
    delegate.handleInsert(namespace, documents);
  }

  @Override
  public void handleUpdate(
      String namespace, Document selector, Document query, List<Object> modifiedIds) {
    delegate.handleUpdate(namespace, selector, query, modifiedIds);
  }

  @Override
  public void handleDelete(String namespace, Document query, List<Object> deletedIds) {
    delegate.handleDelete(namespace, query, deletedIds);
  }

  @Override
  public void handleDropCollection(String namespace) {
    delegate.handleDropCollection(namespace);
  }
}
