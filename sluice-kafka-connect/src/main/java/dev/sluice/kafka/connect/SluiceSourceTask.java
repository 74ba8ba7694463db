package dev.sluice.kafka.connect;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import dev.sluice.feed.StartPoint;
import dev.sluice.kafka.connect.internal.Offsets;
import dev.sluice.kafka.connect.internal.Records;
import dev.sluice.kafka.connect.internal.TaskMetrics;
import dev.sluice.kafka.connect.internal.Unit;
import dev.sluice.mongodb.feed.MongoChangeFeed;
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
 * Reads the (collection, partition) units the connector gave this task, each from its committed
 * offset, and hands their changes to Connect in feed order. One MongoDB client per task; the
 * partitions of one collection that this task holds share one change stream cursor (ADR 0074).
 * See {@link SluiceSourceConnector} for what the records hold.
 */
public final class SluiceSourceTask extends SourceTask {
  private static final Logger log = LoggerFactory.getLogger(SluiceSourceTask.class);

  private SluiceSourceConfig config;
  private MongoClient client;
  private TaskMetrics metrics;
  private final List<PartitionReader> readers = new ArrayList<>();
  private final Object signal = new Object();
  private boolean woken;
  private volatile boolean stopping;
  private int next;

  @Override
  public String version() {
    return SluiceSourceConnector.VERSION;
  }

  @Override
  public void start(Map<String, String> props) {
    config = new SluiceSourceConfig(props);
    String connector = props.getOrDefault("name", "sluice");
    int task = Integer.parseInt(props.getOrDefault(SluiceSourceConfig.TASK_INDEX, "0"));
    List<Unit> units = Unit.decode(props.get(SluiceSourceConfig.TASK_UNITS));
    metrics = new TaskMetrics(connector, task, this::lagMillis);
    client = MongoClients.create(config.uri());
    try {
      Records records = new Records(config.envelopeValues());
      Map<String, MongoChangeFeed> feeds = new HashMap<>();
      for (Unit u : units) {
        feeds.computeIfAbsent(u.collection(), c -> SluiceSourceConnector.feed(client, config, c).forGroup(connector));
      }
      List<Map<String, Object>> partitions = new ArrayList<>();
      for (Unit u : units) {
        partitions.add(Offsets.partition(feeds.get(u.collection()).stream(), u.index(), u.count()));
      }
      OffsetStorageReader reader = context.offsetStorageReader();
      Map<Map<String, Object>, Map<String, Object>> committed = reader.offsets(partitions);
      Map<String, StartPoint> starts = new LinkedHashMap<>();
      for (Unit u : units) {
        MongoChangeFeed feed = feeds.get(u.collection());
        Map<String, Object> offset = committed.get(Offsets.partition(feed.stream(), u.index(), u.count()));
        if (Offsets.position(offset) == null && !starts.containsKey(u.collection())) {
          starts.put(u.collection(), SluiceSourceConnector.startFor(reader, config, feed));
        }
        PartitionReader r = new PartitionReader(u, feed, config, records, metrics, connector,
            connector + "-" + task, offset, this::wake);
        readers.add(r);
        r.open(starts.getOrDefault(u.collection(), StartPoint.latest()));
      }
      log.info("Task {} of connector {} reads {}", task, connector, Unit.encode(units));
    } catch (RuntimeException e) {
      stop();
      throw e instanceof ConnectException ? e : new ConnectException(e.getMessage(), e);
    }
  }

  private void wake() {
    synchronized (signal) {
      woken = true;
      signal.notifyAll();
    }
  }

  @Override
  public List<SourceRecord> poll() throws InterruptedException {
    long deadline = System.nanoTime() + config.pollMaxWait().toNanos();
    List<SourceRecord> out = new ArrayList<>();
    while (!stopping) {
      long left = deadline - System.nanoTime();
      int waiting = 0;
      for (PartitionReader r : readers) {
        waiting += r.parks() ? 0 : 1;
      }
      Duration wait = Duration.ofNanos(Math.max(0, Math.min(left, Duration.ofMillis(100).toNanos()))
          / Math.max(1, waiting));
      // Round-robin start, so one busy partition cannot starve the others of a batch.
      for (int i = 0; i < readers.size(); i++) {
        readers.get((next + i) % readers.size()).read(out, wait);
      }
      next = readers.isEmpty() ? 0 : (next + 1) % readers.size();
      long now = System.nanoTime();
      for (PartitionReader r : readers) {
        r.heartbeat(out, now);
      }
      if (!out.isEmpty()) {
        return out;
      }
      left = deadline - System.nanoTime();
      if (left <= 0) {
        return null;
      }
      if (waiting == 0) {
        synchronized (signal) {
          if (!woken && !stopping) {
            signal.wait(Math.max(1, left / 1_000_000));
          }
          woken = false;
        }
      }
    }
    return null;
  }

  private long lagMillis() {
    long max = 0;
    for (PartitionReader r : List.copyOf(readers)) {
      max = Math.max(max, r.lagMillis());
    }
    return max;
  }

  @Override
  public void stop() {
    stopping = true;
    wake();
    synchronized (this) {
      for (PartitionReader r : readers) {
        r.close();
      }
      if (client != null) {
        client.close();
        client = null;
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
    for (PartitionReader r : readers) {
      Instant t = r.handedTime();
      b.append(r.sourcePartition()).append('@').append(t).append(' ');
    }
    return b.append(']').toString();
  }

}
