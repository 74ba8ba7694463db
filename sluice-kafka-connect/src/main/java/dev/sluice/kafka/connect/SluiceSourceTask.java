package dev.sluice.kafka.connect;

import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.internal.Offsets;
import dev.sluice.kafka.connect.internal.Records;
import dev.sluice.kafka.connect.internal.TaskMetrics;
import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.kafka.connect.source.ConnectSource;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;
import org.apache.kafka.connect.storage.OffsetStorageReader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the (stream, partition) units the connector gave this task, each from its committed
 * offset, and hands their changes to Connect in feed order. One MongoDB client per task, the
 * partitions of one collection that this task holds sharing one change stream cursor (ADR 0074);
 * on PostgreSQL a replication slot per partition, told the offsets Connect committed. The
 * partitions are read on a thread of the task's own, one pass ahead of {@code poll} ({@link ReadAhead}).
 * See {@link SluiceSourceConnector} for what the records hold.
 */
public final class SluiceSourceTask extends SourceTask {
  private static final Logger log = LoggerFactory.getLogger(SluiceSourceTask.class);

  private SluiceSourceConfig config;
  private ConnectSource<?> source;
  private TaskMetrics metrics;
  private final List<PartitionReader<?>> readers = new ArrayList<>();
  private volatile ReadAhead readAhead;
  /** Used by the reading thread only, like the readers. */
  private int next;
  private long confirmedAtNanos;

  @Override
  public String version() {
    return SluiceSourceConnector.VERSION;
  }

  @Override
  public void start(Map<String, String> props) {
    config = new SluiceSourceConfig(props);
    String connector = config.connectorName();
    int task = Integer.parseInt(props.getOrDefault(SluiceSourceConfig.TASK_INDEX, "0"));
    List<Unit> units = Unit.decode(props.get(SluiceSourceConfig.TASK_UNITS));
    metrics = new TaskMetrics(connector, task, this::lagMillis);
    try {
      if (metrics.registerWithConnect(context)) {
        log.info("Task {} of connector {} reports its metrics through Connect's plugin metrics too", task, connector);
      }
      source = ConnectSource.open(config);
      readAhead = new ReadAhead("sluice-connect-" + connector + "-" + task, new Pass(),
          config.batchSize() * Math.max(1, units.size()));
      openReaders(source, units, connector, task);
      log.info("Task {} of connector {} reads {}", task, connector, Unit.encode(units));
    } catch (RuntimeException e) {
      stop();
      throw e instanceof ConnectException ? e : new ConnectException(e.getMessage(), e);
    }
    confirmedAtNanos = System.nanoTime();
    readAhead.start();
  }

  /** One reader per unit, each opened after its committed offset or at the stream's start point. */
  private <D> void openReaders(ConnectSource<D> source, List<Unit> units, String connector, int task) {
    Records<D> records = new Records<>(config.envelopeValues(), source.mapper(), source::json);
    Map<String, ChangeFeed<D>> feeds = new HashMap<>();
    for (Unit u : units) {
      feeds.computeIfAbsent(u.stream(), c -> source.feed(c).forGroup(connector));
    }
    OffsetStorageReader reader = context.offsetStorageReader();
    List<Map<String, Object>> partitions = partitions(feeds, units);
    Map<Map<String, Object>, Map<String, Object>> committed = reader.offsets(partitions);
    Map<String, StartPoint> starts = new LinkedHashMap<>();
    for (int i = 0; i < units.size(); i++) {
      Unit u = units.get(i);
      ChangeFeed<D> feed = feeds.get(u.stream());
      Map<String, Object> offset = committed.get(partitions.get(i));
      if (Offsets.position(offset) == null && !starts.containsKey(u.stream())) {
        starts.put(u.stream(), SluiceSourceConnector.startFor(reader, config, feed));
      }
      PartitionReader<D> r = new PartitionReader<>(u, feed, config, records, metrics, connector,
          connector + "-" + task, offset, this::wake);
      readers.add(r);
      r.open(starts.getOrDefault(u.stream(), StartPoint.latest()));
    }
  }

  private static List<Map<String, Object>> partitions(Map<String, ? extends ChangeFeed<?>> feeds, List<Unit> units) {
    List<Map<String, Object>> partitions = new ArrayList<>();
    for (Unit u : units) {
      partitions.add(Offsets.partition(feeds.get(u.stream()).stream(), u.index(), u.count()));
    }
    return partitions;
  }

  /**
   * Every {@link SluiceSourceConfig#OFFSET_CONFIRM_INTERVAL_MS}, when the source needs it: reads
   * this task's committed offsets back from Connect's offset store and confirms each to its
   * partition's cursor. Read back rather than taken from the records handed out, because only the
   * store says what a restarted task would resume after (in at-least-once mode the offsets are
   * flushed some time after the records are written, in exactly-once mode with the transaction).
   */
  private void confirmCommitted() {
    if (!source.confirmsOffsets() || System.nanoTime() - confirmedAtNanos < config.offsetConfirmInterval().toNanos()) {
      return;
    }
    confirmedAtNanos = System.nanoTime();
    List<Map<String, Object>> partitions = new ArrayList<>();
    for (PartitionReader<?> r : readers) {
      partitions.add(r.sourcePartition());
    }
    Map<Map<String, Object>, Map<String, Object>> committed;
    try {
      committed = context.offsetStorageReader().offsets(partitions);
    } catch (RuntimeException e) {
      log.warn("Cannot read the committed offsets back to confirm them to the source (tried again in {}): {}",
          config.offsetConfirmInterval(), e.toString());
      return;
    }
    for (PartitionReader<?> r : readers) {
      r.confirm(Offsets.position(committed.get(r.sourcePartition())));
    }
  }

  private void wake() {
    ReadAhead r = readAhead;
    if (r != null) {
      r.wake();
    }
  }

  /** One pass of the reading thread: each partition in turn, then their heartbeats. */
  private final class Pass implements ReadAhead.Pass {
    @Override
    public void before() {
      confirmCommitted();
    }

    @Override
    public int waiting() {
      int waiting = 0;
      for (PartitionReader<?> r : readers) {
        waiting += r.parks() ? 0 : 1;
      }
      return waiting;
    }

    @Override
    public void read(List<SourceRecord> out, Duration wait) {
      // Round-robin start, so one busy partition cannot starve the others of a batch.
      for (int i = 0; i < readers.size(); i++) {
        readers.get((next + i) % readers.size()).read(out, wait);
      }
      next = readers.isEmpty() ? 0 : (next + 1) % readers.size();
      long now = System.nanoTime();
      for (PartitionReader<?> r : readers) {
        r.heartbeat(out, now);
      }
    }
  }

  /**
   * What the reading thread read since the last poll, in feed order; waits up to {@link
   * SluiceSourceConfig#POLL_MAX_WAIT_MS} when it has nothing, then returns null.
   */
  @Override
  public List<SourceRecord> poll() throws InterruptedException {
    ReadAhead r = readAhead;
    return r == null ? null : r.take(config.pollMaxWait());
  }

  private long lagMillis() {
    long max = 0;
    for (PartitionReader<?> r : List.copyOf(readers)) {
      max = Math.max(max, r.lagMillis());
    }
    return max;
  }

  @Override
  public void stop() {
    synchronized (this) {
      if (readAhead != null) {
        readAhead.close(); // first: the readers are its thread's
      }
      for (PartitionReader<?> r : readers) {
        r.close();
      }
      if (source != null) {
        source.close();
        source = null;
      }
      if (metrics != null) {
        metrics.close();
        metrics = null;
      }
    }
  }

  /** For logs: where each partition stands. */
  @Override
  public String toString() {
    StringBuilder b = new StringBuilder("SluiceSourceTask[");
    for (PartitionReader<?> r : readers) {
      Instant t = r.handedTime();
      b.append(r.sourcePartition()).append('@').append(t).append(' ');
    }
    return b.append(']').toString();
  }

}
