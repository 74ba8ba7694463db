package dev.sluice.kafka.connect.internal;

import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.Gauge;
import org.apache.kafka.common.metrics.JmxReporter;
import org.apache.kafka.common.metrics.KafkaMetricsContext;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.CumulativeSum;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.common.utils.Time;

/**
 * A task's metrics, through Kafka's own metrics library and JMX reporter (Connect 3.9 gives
 * plugins no handle on the worker's metrics registry; {@code PluginMetrics}, KIP-877, came in
 * 4.1). MBean {@code sluice.connect:type=source-task-metrics,connector=<name>,task=<n>}, next to
 * the worker's own {@code kafka.connect:type=source-task-metrics,...}:
 * {@code changes-total}, {@code changes-rate} (per second), {@code heartbeats-total},
 * {@code parked-total}, {@code history-lost-total}, {@code lag-ms} (the largest of the task's
 * partitions: 0 when caught up, else now minus the cluster time of the last change read).
 */
public final class TaskMetrics implements AutoCloseable {
  /** The JMX domain. */
  public static final String DOMAIN = "sluice.connect";
  private static final String GROUP = "source-task-metrics";

  private final Metrics metrics;
  private final Sensor changes;
  private final Sensor heartbeats;
  private final Sensor parked;
  private final Sensor historyLost;

  public TaskMetrics(String connector, int task, LongSupplier lagMillis) {
    Map<String, String> tags = Map.of("connector", connector, "task", Integer.toString(task));
    this.metrics = new Metrics(new MetricConfig().tags(tags), List.of(new JmxReporter()), Time.SYSTEM,
        new KafkaMetricsContext(DOMAIN));
    changes = metrics.sensor("changes");
    changes.add(name("changes-total", "Changes handed to Connect"), new CumulativeSum());
    changes.add(name("changes-rate", "Changes handed to Connect per second"), new Rate());
    heartbeats = counter("heartbeats-total", "Heartbeat records sent");
    parked = counter("parked-total", "Changes parked to the parked topic");
    historyLost = counter("history-lost-total", "Times a committed position had fallen off the oplog");
    metrics.addMetric(name("lag-ms", "Largest lag of the task's partitions, in milliseconds"),
        (Gauge<Long>) (config, now) -> lagMillis.getAsLong());
  }

  private Sensor counter(String metric, String doc) {
    Sensor s = metrics.sensor(metric);
    s.add(name(metric, doc), new CumulativeSum());
    return s;
  }

  private MetricName name(String metric, String doc) {
    return metrics.metricName(metric, GROUP, doc);
  }

  public void changes(int n) {
    changes.record(n);
  }

  public void heartbeat() {
    heartbeats.record();
  }

  public void parked() {
    parked.record();
  }

  public void historyLost() {
    historyLost.record();
  }

  @Override
  public void close() {
    metrics.close();
  }
}
