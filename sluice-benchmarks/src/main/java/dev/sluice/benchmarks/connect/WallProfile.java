package dev.sluice.benchmarks.connect;

import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

/**
 * A wall-clock profile of the relay's partition thread or the connector's task thread (issue 36
 * target 2): a sampler thread takes the thread's stack every millisecond and counts the sample
 * under the first label, in the given order, of which a frame ({@code Class.method}, by prefix) is
 * on the stack. A JFR execution sample sees only a thread that runs; this sees one that waits too
 * (for a socket, a future).
 */
final class WallProfile implements AutoCloseable {
  private final Map<String, String[]> labels;
  private final Map<String, Long> counts = new LinkedHashMap<>();
  private final Thread sampler;
  private volatile boolean running = true;

  /**
   * Samples the live threads {@code which} accepts (looked up again every 100 ms); at each tick the
   * first whose stack has a frame {@code busy} names (by prefix) is counted, and "between turns" if
   * none has. {@code labels}: label to frame prefixes, in priority order.
   */
  WallProfile(Predicate<Thread> which, String busy, Map<String, String[]> labels) {
    this.labels = labels;
    labels.keySet().forEach(k -> counts.put(k, 0L));
    counts.put("other", 0L);
    counts.put("between turns", 0L);
    sampler = new Thread(() -> {
      List<Thread> targets = List.of();
      long lookedUp = 0;
      while (running) {
        if (System.nanoTime() - lookedUp > 100_000_000L) {
          targets = Thread.getAllStackTraces().keySet().stream().filter(which).toList();
          lookedUp = System.nanoTime();
        }
        StackTraceElement[] found = null;
        for (Thread t : targets) {
          StackTraceElement[] stack = t.getStackTrace();
          if (Arrays.stream(stack).anyMatch(f -> (f.getClassName() + "." + f.getMethodName()).startsWith(busy))) {
            found = stack;
            break;
          }
        }
        if (found != null) {
          count(found);
        } else if (!targets.isEmpty()) {
          synchronized (this) {
            counts.merge("between turns", 1L, Long::sum);
          }
        }
        LockSupport.parkNanos(1_000_000); // the sampling interval
      }
    }, "wall-profile");
    sampler.setDaemon(true);
    sampler.start();
  }

  private synchronized void count(StackTraceElement[] stack) {
    for (Map.Entry<String, String[]> l : labels.entrySet()) {
      for (StackTraceElement f : stack) {
        String frame = f.getClassName() + "." + f.getMethodName();
        for (String prefix : l.getValue()) {
          if (frame.startsWith(prefix)) {
            counts.merge(l.getKey(), 1L, Long::sum);
            return;
          }
        }
      }
    }
    counts.merge("other", 1L, Long::sum);
  }

  /** The samples per label, in percent of all. */
  synchronized String split() {
    long total = counts.values().stream().mapToLong(Long::longValue).sum();
    StringBuilder b = new StringBuilder(total + " samples:");
    counts.forEach((k, v) -> b.append(String.format(" %s %.0f%%,", k, total == 0 ? 0 : 100.0 * v / total)));
    return b.substring(0, b.length() - 1);
  }

  /** The labels of the relay's and the connector's work, in priority order, for both feeds. */
  static Map<String, String[]> relayAndConnector() {
    Map<String, String[]> m = new LinkedHashMap<>();
    // The connector's task thread waiting for its reading thread (ADR 0129); the relay's worker
    // does not wait for its read-ahead (ADR 0130): it is between turns meanwhile.
    m.put("wait for the reading thread", new String[] {"dev.sluice.kafka.connect.ReadAhead.take"});
    m.put("checkpoint write", new String[] {"dev.sluice.listener.internal.Checkpointer.write"});
    m.put("wait for broker acks", new String[] {"dev.sluice.listener.internal.Checkpointer.acknowledged",
        "dev.sluice.listener.internal.Checkpointer.checkpoint"});
    m.put("flush request", new String[] {"dev.sluice.listener.internal.Checkpointer.requestFlush"});
    m.put("feed I/O", new String[] {"com.mongodb.internal.connection", "org.postgresql.core",
        "org.postgresql.replication"});
    m.put("envelope", new String[] {"dev.sluice.sink.EnvelopeEncoder", "dev.sluice.sink.MessageEncoder"});
    m.put("producer send", new String[] {"org.apache.kafka.clients.producer.KafkaProducer.send"});
    m.put("feed decode", new String[] {"dev.sluice.mongodb.feed", "dev.sluice.postgres.feed", "org.bson",
        "com.mongodb"});
    m.put("lease", new String[] {"dev.sluice.lease", "dev.sluice.mongodb.lease", "dev.sluice.jdbc.lease"});
    m.put("connect runtime", new String[] {"org.apache.kafka.connect.runtime.AbstractWorkerSourceTask.sendRecords",
        "org.apache.kafka.connect.runtime.WorkerSourceTask.commitOffsets"});
    return m;
  }

  /** The relay's partition thread of the group {@code group}. */
  static WallProfile relay(String group) {
    return new WallProfile(t -> t.getName().startsWith("sluice-" + group + "-") && t.getName().matches(".*-[0-9]+"),
        "dev.sluice.listener.internal.PartitionWorker.turn", relayAndConnector());
  }

  /** The connector's (first) task thread. */
  static WallProfile connectorTask() {
    return new WallProfile(t -> Arrays.stream(t.getStackTrace())
        .anyMatch(f -> f.getClassName().equals("org.apache.kafka.connect.runtime.WorkerTask")),
        "org.apache.kafka.connect.runtime.WorkerTask", relayAndConnector());
  }

  @Override
  public void close() throws InterruptedException {
    running = false;
    sampler.join(1_000);
  }
}
