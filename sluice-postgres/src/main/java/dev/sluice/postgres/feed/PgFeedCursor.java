package dev.sluice.postgres.feed;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import java.nio.ByteBuffer;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One partition's read of a publication through its replication slot. Used by one thread.
 *
 * <p>Every row change of a transaction counts, whatever its table or partition, so that a position
 * inside a transaction ({@link PgPosition}) names the same change on every replay.
 *
 * <p>This class follows the stream message by message (transactions, the position, the changes
 * this partition receives); the rest has a file of its own: where the read starts ({@link
 * PgStartPosition}), the bootstrap snapshot ({@link PgSnapshotRead}), the replication stream with
 * its slot take-over, keep-alive and acknowledgements ({@link PgSlotStream}), the rows of pgoutput
 * messages ({@link PgRowDecoder}), the catalog queries ({@link PgCatalog}) and the key ranges a
 * restarted snapshot covers ({@link PgCovers}).
 */
final class PgFeedCursor implements FeedCursor<Map<String, Object>> {
  private static final Logger log = LoggerFactory.getLogger(PgFeedCursor.class);
  private static final long MIN_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(5);
  private static final long MAX_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  private final PostgresChangeFeedImpl feed;
  private final PartitionSpec partition;
  private final String slot;
  private final PgSlot slots;
  private final PgSlotStream stream;
  private Position position;
  /** The transaction boundary the stream stands after (where a restart resumes). */
  private long boundary;
  /** The transaction being read: its xid (0 between transactions), commit time, rows seen. */
  private long xid;
  private long finalLsn;
  private Instant commitTime;
  private long rows;
  /** The logical-decoding messages of the transaction being read, counted apart from rows (ADR 0096). */
  private long messages;
  /** The snapshot being read (bootstrap); null once it is complete, or when the partition starts with the stream. */
  private PgSnapshotRead snapshot;
  /** Key ranges read in a later snapshot after a restart, whose earlier changes are left out. */
  private final PgCovers covers;
  private final PgCatalog catalog;
  private final PgRowDecoder decoder;
  /** Rows of the first transaction to skip: processed before the restart that opened this cursor. */
  private long skipXid;
  private long skipRows;
  private long skipMessages;
  /** 1 if the old key's delete of the row after those was processed too (a key-changing update). */
  private int skipPart;
  private boolean caughtUp;
  private FeedException failure;

  PgFeedCursor(PostgresChangeFeedImpl feed, PartitionSpec partition, String slot) {
    this.feed = feed;
    this.partition = partition;
    this.slot = slot;
    this.slots = new PgSlot(feed, slot);
    this.catalog = new PgCatalog(feed, slot);
    this.decoder = new PgRowDecoder(catalog);
    this.covers = new PgCovers(feed, catalog);
    this.stream = new PgSlotStream(feed, slot, slots);
  }

  void start(StartPoint start) {
    try {
      PgStartPosition.Start begin = new PgStartPosition(feed, slot, slots).resolve(start);
      PgPosition from = begin.from();
      if (begin.snapshot() != null) {
        snapshot = new PgSnapshotRead(feed, partition, slot, covers, begin.snapshot(), from);
      }
      boundary = from.lsn();
      skipXid = from.xid();
      skipRows = from.rows();
      skipMessages = from.messages();
      skipPart = from.part();
      covers.resume(from);
      position = from.toPosition(start instanceof StartPoint.After a ? a.position().time() : null);
      if (snapshot == null) {
        stream.open(from.lsn());
      }
    } catch (SQLException e) {
      close();
      throw translate(e, start instanceof StartPoint.Snapshot
          ? "read the snapshot of slot " + slot : "open the replication stream of slot " + slot);
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  @Override
  public List<ChangeEvent<Map<String, Object>>> poll(Duration maxWait) {
    if (failure != null) {
      throw failure;
    }
    if (snapshot != null) {
      return readSnapshot();
    }
    stream.lock();
    try {
      return read(maxWait);
    } finally {
      stream.unlock();
    }
  }

  private List<ChangeEvent<Map<String, Object>>> read(Duration maxWait) {
    List<ChangeEvent<Map<String, Object>>> out = new ArrayList<>();
    if (!stream.isOpen()) {
      return out;
    }
    long deadline = System.nanoTime() + Math.max(0, maxWait.toNanos());
    long backoff = MIN_BACKOFF_NANOS;
    while (true) {
      ByteBuffer message;
      try {
        message = stream.readPending();
      } catch (SQLException e) {
        return stop(translate(e, "read slot " + slot), out);
      }
      if (message == null) {
        // Everything the server sent has been read: a connection silent past the replication
        // timeout although asked for a reply every status interval is cut off (ADR 0106).
        FeedException dead = stream.silence();
        if (dead == null) {
          try {
            stream.probeIfDue();
          } catch (SQLException e) {
            dead = translate(e, "tell slot " + slot + " its status");
          }
        }
        if (dead != null) {
          return stop(dead, out);
        }
        caughtUp = true;
        idleAdvance();
        long remaining = deadline - System.nanoTime();
        if (!out.isEmpty() || remaining <= 0) {
          return out;
        }
        LockSupport.parkNanos(Math.min(backoff, remaining));
        backoff = Math.min(backoff * 2, MAX_BACKOFF_NANOS);
        if (Thread.currentThread().isInterrupted()) {
          return out;
        }
        continue;
      }
      caughtUp = false;
      backoff = MIN_BACKOFF_NANOS;
      PgOutput.Message decoded;
      try {
        decoded = PgOutput.decode(message);
      } catch (PgOutput.Malformed e) {
        return stop(new FeedException("PostgreSQL feed '" + feed.stream() + "': a message after " + position
            + " of slot " + slot + " cannot be decoded: " + e.getMessage() + ". The cursor stops here so that"
            + " nothing is skipped", e, false), out);
      }
      accept(decoded, out);
      // The deadline holds whatever arrives: a backlog or a large transaction of other keys or
      // tables would otherwise keep the poll (and the partition's heartbeats, lease checks and
      // checkpoints) inside the stream until it ran dry. Returning between two messages is always
      // safe: the position then names the transaction and its rows read so far (ADR 0063).
      if (out.size() >= feed.batchSize || deadline - System.nanoTime() <= 0) {
        return out;
      }
    }
  }

  /** The next chunk of the snapshot; at its end the stream starts where the slot did. */
  private List<ChangeEvent<Map<String, Object>>> readSnapshot() {
    List<ChangeEvent<Map<String, Object>>> out = new ArrayList<>();
    try {
      try {
        snapshot.read(out);
      } finally {
        if (snapshot.position() != null) {
          position = snapshot.position(); // the last row or table read
        }
      }
      if (snapshot.done()) {
        boundary = snapshot.slotStart();
        snapshot = null;
        stream.open(boundary);
      }
      return out;
    } catch (SQLException e) {
      return stop(translate(e, "read the snapshot of slot " + slot), out);
    }
  }

  /**
   * The cursor stops at {@code failure}: closed, it returns what was read before it, and the next
   * poll (or this one, when nothing was read) throws it.
   */
  private List<ChangeEvent<Map<String, Object>>> stop(FeedException failure,
      List<ChangeEvent<Map<String, Object>>> out) {
    this.failure = failure;
    close();
    if (out.isEmpty()) {
      throw failure;
    }
    return out;
  }

  /**
   * Between transactions with nothing pending, everything the server sent before its last
   * keep-alive's position has been read: the position moves there, so the engine's heartbeat
   * checkpoint (and then the slot) advances over WAL with no change for this feed (other tables,
   * other databases) and an idle slot does not hold WAL for ever.
   */
  private void idleAdvance() {
    if (xid != 0 || skipXid != 0) {
      return; // inside a transaction, or before the one a checkpoint inside it names: the position names it
    }
    long sent = stream.lastReceiveLsn();
    if (sent > boundary) {
      boundary = sent;
      position = positionAt(boundary, 0, 0, null, position.time());
    }
  }

  private void accept(PgOutput.Message m, List<ChangeEvent<Map<String, Object>>> out) {
    if (m instanceof PgOutput.Begin b) {
      if (skipXid != 0 && b.xid() != skipXid) {
        throw drifted("the stream from " + PgPosition.lsnText(boundary) + " begins with transaction "
            + b.xid() + " (commit " + PgPosition.lsnText(b.finalLsn()) + ")");
      }
      xid = b.xid();
      finalLsn = b.finalLsn();
      commitTime = b.commitTime();
      rows = 0;
      messages = 0;
    } else if (m instanceof PgOutput.Commit c) {
      if (xid == skipXid && (rows < skipRows || rows == skipRows && skipPart > 0)) {
        throw drifted("transaction " + xid + " (commit " + PgPosition.lsnText(c.commitLsn())
            + ") now has " + rows + " changes");
      }
      boundary = c.endLsn();
      covers.committed(boundary);
      position = positionAt(boundary, 0, 0, null, c.commitTime());
      xid = 0;
      skipXid = 0;
    } else if (m instanceof PgOutput.Relation r) {
      decoder.described(r);
    } else if (m instanceof PgOutput.Insert i) {
      row(i.relationId(), Operation.INSERT, i.row(), null, out);
    } else if (m instanceof PgOutput.Update u) {
      row(u.relationId(), Operation.UPDATE, u.row(), u.old(), out);
    } else if (m instanceof PgOutput.Delete d) {
      row(d.relationId(), Operation.DELETE, null, d.old(), out);
    } else if (m instanceof PgOutput.Truncate t) {
      for (int id : t.relationIds()) {
        PgOutput.Relation r = decoder.relation(id);
        covers.truncated(r.qualifiedName());
        if (!advance() || !wanted(r)) {
          continue;
        }
        Map<String, Object> raw = Map.of("truncate", r.qualifiedName(), "cascade", t.cascade(),
            "restartIdentity", t.restartIdentity());
        out.add(new ChangeEvent<>(eventId(), feed.stream(), position, Operation.OTHER, "", null, null,
            commitTime, raw));
      }
    } else if (m instanceof PgOutput.LogicalMessage lm) {
      message(lm, out);
    } else if (m instanceof PgOutput.Type t) {
      catalog.described(t);
    }
    // ORIGIN carries nothing a change needs.
  }

  /**
   * A logical-decoding message (ADR 0096). A transactional one counts among its transaction's
   * messages, so a checkpoint inside the transaction names it on every replay; a non-transactional
   * one comes between transactions, where the stream may resume after it: its LSN is where its WAL
   * record ends, and the server does not send it again to a stream started there.
   */
  private void message(PgOutput.LogicalMessage m, List<ChangeEvent<Map<String, Object>>> out) {
    boolean inTransaction = m.transactional() && xid != 0;
    String id;
    Instant time;
    if (inTransaction) {
      messages++;
      position = positionAt(boundary, xid, rows, null, commitTime);
      if (xid == skipXid && messages <= skipMessages) {
        return;
      }
      id = PgPosition.lsnText(finalLsn) + "#m" + messages;
      time = commitTime;
    } else {
      if (xid == 0 && m.lsn() > boundary) {
        boundary = m.lsn();
        position = positionAt(boundary, 0, 0, null, position.time());
      }
      id = PgPosition.lsnText(m.lsn()) + "#m";
      time = Instant.now();
    }
    if (!feed.delivers(m.prefix()) || !partition.receives(m.prefix())) {
      return;
    }
    Map<String, Object> document = new LinkedHashMap<>();
    document.put("prefix", m.prefix());
    document.put("content", PgRowDecoder.content(m.content()));
    document.put("transactional", m.transactional());
    document.put("lsn", PgPosition.lsnText(m.lsn()));
    Map<String, Object> raw = new LinkedHashMap<>(document);
    raw.put("xid", inTransaction ? xid : 0L);
    out.add(new ChangeEvent<>(id, feed.stream(), position, Operation.MESSAGE, m.prefix(),
        Map.of("prefix", m.prefix()), Collections.unmodifiableMap(document), time,
        Collections.unmodifiableMap(raw), DocumentState.AFTER_CHANGE, null, null));
  }

  /**
   * The checkpoint inside a transaction no longer names the change it named when it was taken
   * (ADR 0063): refused, since skipping its count of changes would now skip or repeat others.
   */
  private FeedException drifted(String what) {
    failure = new FeedException("PostgreSQL feed '" + feed.stream() + "': slot " + slot + " resumed inside"
        + " transaction " + skipXid + " after " + skipRows + (skipPart > 0 ? "+" + skipPart : "") + " of its changes"
        + " (checkpoint at " + PgPosition.lsnText(boundary) + "), but " + what + ", so the"
        + " checkpoint no longer names the same change. Nothing was skipped; restore the checkpoint written for"
        + " this slot, or reset the partition (a snapshot) to go on", null, false);
    close();
    return failure;
  }

  /** A position of this cursor: at {@code lsn} (and inside transaction {@code xid}), with its snapshot state. */
  private Position positionAt(long lsn, long xid, long rows, PgPosition.SnapshotAt at, Instant time) {
    return covers.at(lsn, xid, rows, at, 0, xid == 0 ? 0 : messages).toPosition(time);
  }

  /** Counts one change of the transaction; false if it was processed before this cursor opened. */
  private boolean advance() {
    rows++;
    position = positionAt(boundary, xid, rows, null, commitTime);
    return !(xid == skipXid && rows <= skipRows);
  }

  private void row(int relationId, Operation op, List<PgOutput.Value> row, List<PgOutput.Value> old,
      List<ChangeEvent<Map<String, Object>>> out) {
    PgOutput.Relation r = decoder.relation(relationId);
    if (!advance() || !wanted(r)) {
      return;
    }
    List<PgOutput.Value> keySource = row != null ? row : old;
    List<String> keyTexts = decoder.keyTexts(r, keySource, old);
    String key = PgRowDecoder.key(r.qualifiedName(), keyTexts);
    String rowId = PgRowDecoder.rowId(r.qualifiedName(), keyTexts);
    if (covers.applyTo(r, rowId) && covers.coveredBefore(r, keySource, finalLsn)) {
      if (old == null || covers.coveredBefore(r, old, finalLsn)) {
        return; // the row was read, with this change, in a snapshot taken after it
      }
      // An update moved the key out of a range read earlier: delivered, so the consumer drops the
      // old key; the new key then holds this older state, so its later changes must come too.
      covers.uncover(rowId);
      position = positionAt(boundary, xid, rows, null, commitTime);
    }
    // An update that changed the row's key: its old key's partition gets a delete (ADR 0094),
    // unless that delete was processed before this cursor opened.
    String oldKey = old != null && op == Operation.UPDATE ? decoder.oldKey(r, old, keyTexts) : null;
    boolean deliverOldKeysDelete = oldKey != null && partition.receives(oldKey)
        && !(xid == skipXid && rows == skipRows + 1 && skipPart == 1);
    if (!partition.receives(key) && !deliverOldKeysDelete) {
      return; // another partition's row: not converted here (ADR 0091)
    }
    Map<String, Object> raw = new LinkedHashMap<>();
    raw.put("table", r.qualifiedName());
    raw.put("xid", xid);
    boolean wholeRow = old != null && old.size() == r.columns().size() && PgRowDecoder.oldIsWholeRow(r);
    Map<String, Object> documentKey;
    Map<String, Object> document = null;
    Map<String, Object> before = null;
    Map<String, Object> oldValues = null;
    Map<String, Object> oldKeyValues = null;
    List<String> unchanged = List.of();
    try {
      documentKey = decoder.documentKey(r, keySource, old);
      if (old != null) {
        oldValues = Collections.unmodifiableMap(decoder.values(r, old, null, true));
        raw.put(wholeRow ? "before" : "oldKey", oldValues);
        before = wholeRow ? oldValues : null; // REPLICA IDENTITY FULL: the whole row before the change
        if (oldKey != null) {
          oldKeyValues = decoder.keyOf(r, oldValues);
        }
      }
      if (row != null) {
        // An unchanged TOASTed value is not sent ('u'): the whole old row (REPLICA IDENTITY FULL)
        // has it; without one the row is partial (ADR 0092).
        document = decoder.values(r, row, wholeRow ? old : null, false);
        unchanged = PgRowDecoder.unchangedColumns(r, row, wholeRow ? old : null);
      }
    } catch (Unconvertible e) {
      // Handed on under the key this partition delivers (the new one, else the old key's delete).
      boolean asNew = partition.receives(key);
      out.add(undecodable(r, asNew ? op : Operation.DELETE, asNew ? key : oldKey, keyTexts, keySource, raw, e));
      return;
    }
    if (oldKey != null) {
      // The key changed: the old key's row is gone. Its partition gets a delete (so a compacted
      // topic, an upserted view or an inbox drops it), the new key's an insert, each in its own
      // key's order. Both count as one row of the transaction; the position between them says
      // the delete was processed (rows-1, part 1), so a replay repeats neither.
      Map<String, Object> deleteRaw = new LinkedHashMap<>();
      deleteRaw.put("table", r.qualifiedName());
      deleteRaw.put("xid", xid);
      deleteRaw.put(before != null ? "before" : "oldKey", oldValues);
      deleteRaw.put("keyChangedTo", key);
      if (deliverOldKeysDelete) {
        Position between = covers.at(boundary, xid, rows - 1, null, 1, messages).toPosition(commitTime);
        out.add(new ChangeEvent<>(eventId() + ":old-key", feed.stream(), between, Operation.DELETE, oldKey,
            oldKeyValues, null, commitTime, Collections.unmodifiableMap(deleteRaw), DocumentState.NONE, null,
            before));
      }
      op = Operation.INSERT;
      before = null;
      raw.remove("before");
      raw.remove("oldKey");
      raw.put("keyChangedFrom", oldKey);
    }
    if (!partition.receives(key)) {
      return;
    }
    ChangeEvent<Map<String, Object>> event;
    if (!unchanged.isEmpty()) {
      raw.put("unchangedToasted", unchanged);
      event = new ChangeEvent<>(eventId(), feed.stream(), position, op, key, Collections.unmodifiableMap(documentKey),
          null, commitTime, Collections.unmodifiableMap(raw), DocumentState.NONE,
          Collections.unmodifiableMap(document), before);
    } else {
      event = new ChangeEvent<>(eventId(), feed.stream(), position, op, key, Collections.unmodifiableMap(documentKey),
          document == null ? null : Collections.unmodifiableMap(document), commitTime,
          Collections.unmodifiableMap(raw), document == null ? DocumentState.NONE : DocumentState.AFTER_CHANGE,
          null, before);
    }
    out.add(event);
  }

  /**
   * A row that cannot be converted (a value no mapping reads): handed on as an undecodable change of
   * its own key, which the engine parks or blocks on by the failure policy; every other key goes on.
   */
  private ChangeEvent<Map<String, Object>> undecodable(PgOutput.Relation r, Operation op, String key,
      List<String> keyTexts, List<PgOutput.Value> keySource, Map<String, Object> raw, Unconvertible e) {
    raw.put("columns", PgRowDecoder.columnTexts(r, keySource));
    Map<String, Object> documentKey = decoder.keyByName(r, keyTexts); // the key's text: it may be what failed
    String reason = "PostgreSQL feed '" + feed.stream() + "': change " + eventId() + " at " + position + " "
        + e.describe(r.qualifiedName());
    log.warn("{}; handed on as an undecodable change of key {}", reason, key);
    return new ChangeEvent<>(eventId(), feed.stream(), position, op, key, Collections.unmodifiableMap(documentKey),
        null, commitTime, new dev.sluice.feed.UndecodableChange(reason, Collections.unmodifiableMap(raw)));
  }

  private boolean wanted(PgOutput.Relation r) {
    return feed.rows && (feed.table == null || feed.table.equals(r.qualifiedName()));
  }

  /** The change's id, the same on every replay: the transaction's commit LSN and the change's number in it. */
  private String eventId() {
    return PgPosition.lsnText(finalLsn) + "#" + rows;
  }

  private FeedException translate(SQLException e, String doing) {
    String state = e.getSQLState();
    String message = e.getMessage() == null ? "" : e.getMessage();
    if (message.contains("can no longer get changes from replication slot")
        || message.contains("has been invalidated")) {
      return new HistoryLostException(position == null ? new Position("0/0", null) : position, null,
          "replication slot " + slot + " was invalidated: " + message, e);
    }
    if (message.contains("does not exist") && message.contains("publication")) {
      return new FeedException("PostgreSQL feed '" + feed.stream() + "': publication " + feed.publication
          + " does not exist: create it (CREATE PUBLICATION " + feed.publication + " FOR TABLE ...)", e, false);
    }
    if ("42501".equals(state) && message.toLowerCase(java.util.Locale.ROOT).contains("replication")) {
      return new FeedException("PostgreSQL feed '" + feed.stream() + "': the user " + feed.user + " may not read"
          + " replication slots: give it the REPLICATION attribute (ALTER ROLE " + feed.user + " REPLICATION): "
          + message, e, false);
    }
    if (message.contains("is active for PID")) {
      return new FeedException("PostgreSQL feed '" + feed.stream() + "': replication slot " + slot + " is in use by"
          + " another process (" + message.replaceAll("(?s).*(PID \\d+).*", "$1") + "), and a slot has one reader: "
          + (feed.group == null ? "close the other reader, or give this feed another slotPrefix"
              : "waiting for the session it ended to let go") + " (" + message + ")", e, true);
    }
    boolean retryable = passes(state);
    return new FeedException("PostgreSQL feed '" + feed.stream() + "': cannot " + doing + " (SQLSTATE " + state
        + "): " + message, e, retryable);
  }

  /**
   * Whether a failure with SQLSTATE {@code state} passes by itself, so that the partition tries
   * again, showing it, rather than stopping for good: no state (the connection broke), a connection
   * failure (08), an operator's intervention such as a shutdown or a cancelled statement (57), an
   * object in use (55006: the slot's previous reader has not let go), a serialization failure or a
   * deadlock (40), and insufficient resources (53: every WAL sender or connection in use, 53300,
   * as during a rolling deploy; the disk or memory full). Not 53400 (a configuration limit, such as
   * every replication slot taken): it waits for an operator.
   */
  private static boolean passes(String state) {
    return state == null || state.startsWith("08") || state.startsWith("57") || state.equals("55006")
        || state.startsWith("40") || state.startsWith("53") && !state.equals("53400");
  }

  @Override
  public Position position() {
    return position;
  }

  @Override
  public boolean caughtUp() {
    return caughtUp && xid == 0;
  }

  /** Confirms the transaction boundary of {@code committed} to the slot: the server may recycle WAL before it. */
  @Override
  public void acknowledge(Position committed) {
    stream.acknowledge(committed);
  }

  @Override
  public void close() {
    stream.close();
    if (snapshot != null) {
      snapshot.close();
      snapshot = null;
    }
    catalog.close();
  }
}
