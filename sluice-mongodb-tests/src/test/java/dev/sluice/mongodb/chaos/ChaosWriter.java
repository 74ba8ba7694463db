package dev.sluice.mongodb.chaos;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLongArray;
import org.bson.Document;

/**
 * Writes per-key sequence numbers 1, 2, 3, … round-robin into a few keys of the source collection,
 * at a steady rate, from one thread. Each change of key {@code k} replaces the document {@code
 * _id = k} by deleting it and inserting {@code {_id: k, seq: n}}: an insert event carries exactly
 * the written document on every server (a real replica set and the embedded one), whereas an
 * update event's looked-up document may already show a later seq, and the embedded server gives
 * update events no {@code updateDescription}. All changes of a key have the same {@code _id}, so
 * they are in one partition and per-key order is the engine's to keep.
 *
 * <p>A failed write stops the writer and fails the run ({@link #stop}): retrying it could write a
 * seq twice, which would show as a duplicate the engine did not cause.
 */
final class ChaosWriter implements AutoCloseable {
  static final String SEQ = "seq";

  private final MongoCollection<Document> source;
  private final List<String> keys;
  private final AtomicLongArray written;
  private final ScheduledExecutorService thread =
      Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "chaos-writer");
        t.setDaemon(true);
        return t;
      });
  private volatile RuntimeException failure;
  private volatile long firstWriteMillis;
  private volatile long stoppedMillis;
  private int next;

  ChaosWriter(MongoCollection<Document> source, List<String> keys) {
    this.source = source;
    this.keys = List.copyOf(keys);
    this.written = new AtomicLongArray(keys.size());
  }

  /** Starts writing {@code perSecond} changes a second. */
  void start(int perSecond) {
    if (perSecond < 1) {
      throw new IllegalArgumentException("writes per second must be >= 1, but was " + perSecond);
    }
    long periodMicros = 1_000_000L / perSecond;
    thread.scheduleAtFixedRate(this::writeOne, 0, periodMicros, TimeUnit.MICROSECONDS);
  }

  private void writeOne() {
    if (failure != null) {
      return;
    }
    int i = next;
    String key = keys.get(i);
    long seq = written.get(i) + 1;
    try {
      source.deleteOne(Filters.eq("_id", key));
      source.insertOne(new Document("_id", key).append(SEQ, seq));
    } catch (RuntimeException e) {
      failure = new IllegalStateException("the writer failed writing " + key + " seq " + seq, e);
      return;
    }
    if (firstWriteMillis == 0) {
      firstWriteMillis = System.currentTimeMillis();
    }
    written.set(i, seq);
    next = (i + 1) % keys.size();
  }

  /** The last seq written per key, in key order. */
  Map<String, Long> written() {
    Map<String, Long> m = new LinkedHashMap<>();
    for (int i = 0; i < keys.size(); i++) {
      m.put(keys.get(i), written.get(i));
    }
    return m;
  }

  long total() {
    long sum = 0;
    for (int i = 0; i < keys.size(); i++) {
      sum += written.get(i);
    }
    return sum;
  }

  long firstWriteMillis() {
    return firstWriteMillis;
  }

  long stoppedMillis() {
    return stoppedMillis;
  }

  /** Stops writing, waits for the write in progress, and throws if a write had failed. */
  void stop() {
    thread.shutdown();
    try {
      if (!thread.awaitTermination(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the writer did not stop within 30 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while stopping the writer", e);
    }
    if (stoppedMillis == 0) {
      stoppedMillis = System.currentTimeMillis();
    }
    if (failure != null) {
      throw failure;
    }
  }

  /** Throws if a write failed so far. */
  void check() {
    if (failure != null) {
      throw failure;
    }
  }

  @Override
  public void close() {
    thread.shutdownNow();
  }
}
