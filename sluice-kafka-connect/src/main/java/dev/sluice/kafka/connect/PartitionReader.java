package dev.sluice.kafka.connect;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import dev.sluice.feed.UndecodableChange;
import dev.sluice.kafka.connect.internal.Offsets;
import dev.sluice.kafka.connect.internal.Records;
import dev.sluice.kafka.connect.internal.TaskMetrics;
import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.listener.Fence;
import dev.sluice.listener.ListenerConfig;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One source partition read by a task: the feed's cursor for partition {@code index} of {@code
 * count} of one stream (collection or table), opened after the committed offset (or at the
 * startup point), turned into records whose offset is the change's position. Applies the history-lost policy, parks
 * undecodable changes (and every later change of their key), sends heartbeats, and re-opens the
 * cursor after the last record handed to Connect when the source fails transiently. Used by one
 * thread, the task's reading thread ({@link ReadAhead}); "handed" here means queued for Connect.
 */
final class PartitionReader<D> implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PartitionReader.class);
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int MAX_PARKED_KEYS = 10_000;
  private static final Duration MAX_BACKOFF = Duration.ofSeconds(5);

  private final Unit unit;
  private final ChangeFeed<D> feed;
  private final PartitionSpec spec;
  private final SluiceSourceConfig config;
  private final Records<D> records;
  private final TaskMetrics metrics;
  private final String topic;
  private final Map<String, Object> sourcePartition;
  private final Fence fence;
  private final Runnable wake;

  private volatile FeedCursor<D> cursor;
  /** Set by {@link #close}; guarded by this, as is the assignment of {@link #cursor}. */
  private boolean closed;
  private boolean parks;
  /** The position of the last record handed to Connect, or the committed one; null before any. */
  private volatile Position handed;
  private StartPoint bootstrap;
  /** The position must be committed at once (bootstrap point, skipped gap): a heartbeat now. */
  private boolean pin;
  private long lastRecordNanos = System.nanoTime();
  private long retryAtNanos;
  private Duration backoff = Duration.ofMillis(100);
  private final Set<String> parkedKeys = new LinkedHashSet<>();
  private String parkedJson;
  private boolean endReported;
  /** The last committed position confirmed to the current cursor. */
  private Position confirmed;
  private volatile long lagMillis;

  PartitionReader(Unit unit, ChangeFeed<D> feed, SluiceSourceConfig config, Records<D> records,
      TaskMetrics metrics, String connector, String owner, Map<String, Object> committed, Runnable wake) {
    this.unit = unit;
    this.feed = feed;
    this.spec = new PartitionSpec(unit.index(), unit.count());
    this.config = config;
    this.records = records;
    this.metrics = metrics;
    this.topic = config.topic(unit.stream());
    this.sourcePartition = Offsets.partition(feed.stream(), unit.index(), unit.count());
    this.fence = new Fence(ListenerConfig.leaseName(connector, feed.stream(),
        unit.index(), unit.count()), owner, Offsets.epoch(committed) + 1);
    this.wake = wake;
    this.handed = Offsets.position(committed);
    if (committed != null && committed.get(Offsets.PARKED) instanceof String parked) {
      try {
        parkedKeys.addAll(JSON.readValue(parked, new TypeReference<List<String>>() {}));
        parkedJson = parked;
      } catch (JsonProcessingException e) {
        throw new ConnectException("The committed offset of " + sourcePartition + " has unreadable parked keys: "
            + e.getMessage(), e);
      }
    }
  }

  Map<String, Object> sourcePartition() {
    return sourcePartition;
  }

  long lagMillis() {
    return lagMillis;
  }

  /** Whether a cursor is open (for tests). */
  boolean isOpen() {
    return cursor != null;
  }

  /** Whether the cursor wakes the task instead of waiting in a poll. */
  boolean parks() {
    return cursor != null && parks;
  }

  /**
   * Opens the cursor: after the committed offset if there is one, else at {@code start} (then the
   * start is pinned by a heartbeat at once).
   */
  void open(StartPoint start) {
    bootstrap = start;
    if (handed != null) {
      openAt(StartPoint.after(handed));
    } else {
      openAt(start);
      pin = true;
      log.info("Partition {} of {} starts at {} ({}): no committed offset", unit.index(), feed.stream(),
          cursor == null ? "?" : cursor.position(), start);
    }
  }

  private void openAt(StartPoint start) {
    try {
      setCursor(feed.open(spec, start));
    } catch (HistoryLostException e) {
      historyLost(e);
    }
  }

  private void setCursor(FeedCursor<D> c) {
    synchronized (this) {
      if (closed) { // stop gave up waiting for the reading thread: nothing may stay open after it
        closeQuietly(c);
        return;
      }
      cursor = c;
    }
    confirmed = null;
    parks = c.wakeInsteadOfWaiting(wake, () -> false);
  }

  /** Reads what the cursor has (waiting up to {@code wait} if it does not park) into {@code out}. */
  void read(List<SourceRecord> out, Duration wait) {
    if (cursor == null) {
      if (System.nanoTime() - retryAtNanos < 0) {
        return;
      }
      try {
        openAt(handed != null ? StartPoint.after(handed) : bootstrap);
        backoff = Duration.ofMillis(100);
      } catch (FeedException e) {
        failed(e);
        return;
      }
      if (cursor == null) {
        return;
      }
    }
    if (cursor.ended()) {
      if (!endReported) {
        endReported = true;
        log.warn("Partition {} of {} ended: {}. Nothing more is read from it until the connector is"
            + " restarted.", unit.index(), feed.stream(), cursor.endReason());
      }
      return;
    }
    List<ChangeEvent<D>> events;
    try {
      events = cursor.poll(parks ? Duration.ZERO : wait);
    } catch (HistoryLostException e) {
      closeCursor();
      historyLost(e);
      return;
    } catch (FeedException e) {
      failed(e);
      return;
    }
    int changes = 0;
    for (ChangeEvent<D> e : events) {
      String reason = e.raw() instanceof UndecodableChange u ? u.reason() : null;
      SourceRecord record = null;
      if (reason == null && !parkedKeys.contains(e.key())) {
        try {
          record = records.change(e, unit, fence, topic, sourcePartition, offset(e.position()));
        } catch (RuntimeException ex) {
          reason = "cannot convert the change: " + ex.getMessage();
        }
      } else if (reason == null) {
        reason = "an earlier change of key '" + e.key() + "' is parked; later ones follow it to keep per-key order";
      }
      if (record == null) {
        record = park(e, reason);
      } else {
        changes++;
      }
      out.add(record);
      handed = e.position();
      lastRecordNanos = System.nanoTime();
      pin = false;
      if (e.time() != null) {
        lagMillis = Math.max(0, System.currentTimeMillis() - e.time().toEpochMilli());
      }
    }
    if (cursor.caughtUp()) {
      lagMillis = 0;
    }
    metrics.changes(changes);
  }

  private SourceRecord park(ChangeEvent<D> e, String reason) {
    if (!config.parkUndecodable()) {
      throw new ConnectException("Change " + e.id() + " of key '" + e.key() + "' at " + e.position() + " in stream "
          + e.stream() + " cannot be published: " + reason + ". Policy " + SluiceSourceConfig.UNDECODABLE_POLICY
          + "=fail: the task stopped before it; set it to park to send such changes (and the later changes of"
          + " their key) to " + SluiceSourceConfig.PARKED_TOPIC + " and go on with other keys.");
    }
    if (parkedKeys.add(e.key())) {
      if (parkedKeys.size() > MAX_PARKED_KEYS) {
        throw new ConnectException("More than " + MAX_PARKED_KEYS + " keys of " + sourcePartition + " are parked;"
            + " the source is producing changes Sluice cannot read. Stopping rather than parking without bound.");
      }
      try {
        parkedJson = JSON.writeValueAsString(parkedKeys);
      } catch (JsonProcessingException ex) {
        throw new ConnectException(ex);
      }
      log.error("Parking key '{}' of {} partition {} at {}: {}", e.key(), e.stream(), unit.index(), e.position(),
          reason);
    }
    metrics.parked();
    Object raw = e.raw() instanceof UndecodableChange u ? u.source() : e.raw();
    return records.parked(e, unit, reason, raw == null ? null : raw.toString(), config.parkedTopic(),
        sourcePartition, offset(e.position()));
  }

  /** A heartbeat if the position moved without a record for the interval, or must be pinned now. */
  void heartbeat(List<SourceRecord> out, long nowNanos) {
    Duration interval = config.heartbeatInterval();
    if (interval == null || cursor == null) {
      return;
    }
    Position at = cursor.position();
    boolean moved = handed == null || !handed.token().equals(at.token());
    if (pin || (moved && nowNanos - lastRecordNanos >= interval.toNanos())) {
      out.add(records.heartbeat(feed.stream(), unit, at, config.heartbeatTopic(), sourcePartition, offset(at)));
      metrics.heartbeat();
      handed = at;
      lastRecordNanos = nowNanos;
      pin = false;
    }
  }

  private Map<String, Object> offset(Position p) {
    return Offsets.offset(p, fence.epoch(), parkedJson);
  }

  private void historyLost(HistoryLostException e) {
    metrics.historyLost();
    String policy = config.historyLostPolicy();
    if (config.historyLost() == dev.sluice.listener.HistoryLostPolicy.STOP) {
      throw new ConnectException(e.getMessage() + " Source partition " + sourcePartition + " of connector task"
          + " stopped (" + SluiceSourceConfig.HISTORY_LOST_POLICY + "=fail); no change was skipped. To go on:"
          + " set " + SluiceSourceConfig.HISTORY_LOST_POLICY + "=skip (continue at the latest position,"
          + " reporting the gap) or resnapshot, or stop the connector and reset this partition's offset"
          + " (DELETE or PATCH /connectors/<name>/offsets), or enlarge the oplog so it does not happen again.", e);
    }
    boolean repair = config.historyLost() == dev.sluice.listener.HistoryLostPolicy.RESNAPSHOT
        && feed.supports(StartPoint.snapshot());
    setCursor(feed.open(spec, repair ? StartPoint.snapshot() : StartPoint.latest()));
    pin = true; // commit the new position at once: the gap is recorded in the offset
    log.error("GAP in {} partition {} of {}: {} Policy {}: continuing at {}; changes between {} and {} were NOT"
        + " published{}.", feed.stream(), unit.index(), unit.count(), e.getMessage(), policy, cursor.position(),
        e.lostFrom(), cursor.position(), repair ? " except as SNAPSHOT changes of the documents that still exist" : "");
  }

  private void failed(FeedException e) {
    closeCursor();
    if (!e.retryable()) {
      throw new ConnectException("The feed of " + sourcePartition + " failed for good: " + e.getMessage(), e);
    }
    log.warn("Reading {} failed, re-opening after {} in {}: {}", sourcePartition, handed, backoff, e.toString());
    retryAtNanos = System.nanoTime() + backoff.toNanos();
    backoff = backoff.multipliedBy(2).compareTo(MAX_BACKOFF) > 0 ? MAX_BACKOFF : backoff.multipliedBy(2);
  }

  private void closeCursor() {
    FeedCursor<D> c;
    synchronized (this) {
      c = cursor;
      cursor = null;
    }
    closeQuietly(c);
  }

  private void closeQuietly(FeedCursor<D> c) {
    if (c != null) {
      try {
        c.close();
      } catch (RuntimeException e) {
        log.debug("Closing the cursor of {} failed: {}", sourcePartition, e.toString());
      }
    }
  }

  /**
   * Tells the source that Connect committed the offset {@code committed} of this partition (read
   * back from Connect's offset store, so never beyond what a restarted task resumes after): a
   * PostgreSQL slot may recycle the WAL before it. Nothing while the cursor is closed; the next
   * confirmation after it re-opened says it again.
   */
  void confirm(Position committed) {
    if (committed == null || cursor == null || committed.equals(confirmed)) {
      return;
    }
    cursor.acknowledge(committed);
    confirmed = committed;
  }

  /** The source time of the last record handed, for logs. */
  Instant handedTime() {
    return handed == null ? null : handed.time();
  }

  /**
   * Closes the cursor, and any the reading thread opens after this (when the task's stop stopped
   * waiting for it). Safe to call from another thread than the reading one.
   */
  @Override
  public void close() {
    synchronized (this) {
      closed = true;
    }
    closeCursor();
  }
}
