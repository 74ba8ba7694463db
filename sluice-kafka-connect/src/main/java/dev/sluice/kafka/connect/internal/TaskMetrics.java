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
 * A task's metrics: {@code changes-total}, {@code changes-rate} (per second), {@code
 * heartbeats-total}, {@code parked-total}, {@code history-lost-total}, {@code lag-ms} (the largest
 * of the task's partitions: 0 when caught up, else now minus the cluster time of the last change
 * read).
 *
 * <p>Always through Kafka's own metrics library and JMX reporter, as MBean {@code
 * sluice.connect:type=source-task-metrics,connector=<name>,task=<n>}, next to the worker's own
 * {@code kafka.connect:type=source-task-metrics,...}. On workers that give plugins their metrics
 * registry ({@code PluginMetrics}, KIP-877, Connect 4.1+), also there ({@link
 * #registerWithConnect}): group {@code plugins}, tagged with the connector and task by Connect,
 * reported by the worker's configured metric reporters (JMX {@code
 * kafka.connect:type=plugins,connector=<name>,task=<n>}, Prometheus, ...) and removed by Connect
 * with the task. The connector is built against Connect 3.9's API, so that registry is reached by
 * reflection.
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
  /** The same sensors in Connect's registry, once {@link #registerWithConnect} found it; else null. */
  private volatile Sensor[] connect;

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

  /**
   * Registers these metrics in the worker's registry too, where the worker has one for plugins
   * ({@code SourceTaskContext.pluginMetrics()}, Connect 4.1+). Returns whether it did; false on
   * older workers and when the context offers none.
   *
   * @throws IllegalStateException when the worker has the registry but refused a metric
   */
  public boolean registerWithConnect(Object taskContext, LongSupplier lagMillis) {
    Object registry;
    try {
      registry = org.apache.kafka.connect.source.SourceTaskContext.class.getMethod("pluginMetrics").invoke(taskContext);
    } catch (NoSuchMethodException e) {
      return false; // Connect before 4.1
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("Connect's plugin metrics could not be read: " + e, e);
    }
    if (registry == null) {
      return false;
    }
    try {
      Class<?> api = Class.forName("org.apache.kafka.common.metrics.PluginMetrics", false,
          registry.getClass().getClassLoader());
      // metricName(String, String, LinkedHashMap) in 4.1: found by name, so a Map in a later version fits too.
      java.lang.reflect.Method metricName = java.util.Arrays.stream(api.getMethods())
          .filter(m -> m.getName().equals("metricName") && m.getParameterCount() == 3).findFirst()
          .orElseThrow(() -> new NoSuchMethodException(api.getName() + ".metricName(String, String, tags)"));
      java.lang.reflect.Method addSensor = api.getMethod("addSensor", String.class);
      java.lang.reflect.Method addMetric = api.getMethod("addMetric", MetricName.class,
          org.apache.kafka.common.metrics.MetricValueProvider.class);
      java.util.function.BiFunction<String, String, MetricName> name = (metric, doc) -> {
        try {
          return (MetricName) metricName.invoke(registry, metric, doc, new java.util.LinkedHashMap<String, String>());
        } catch (ReflectiveOperationException e) {
          throw new IllegalStateException(e);
        }
      };
      Sensor c = (Sensor) addSensor.invoke(registry, "changes");
      c.add(name.apply("changes-total", "Changes handed to Connect"), new CumulativeSum());
      c.add(name.apply("changes-rate", "Changes handed to Connect per second"), new Rate());
      Sensor[] sensors = {c, null, null, null};
      String[][] counters = {{"heartbeats-total", "Heartbeat records sent"},
          {"parked-total", "Changes parked to the parked topic"},
          {"history-lost-total", "Times a committed position had fallen off the source's history"}};
      for (int i = 0; i < counters.length; i++) {
        sensors[i + 1] = (Sensor) addSensor.invoke(registry, counters[i][0]);
        sensors[i + 1].add(name.apply(counters[i][0], counters[i][1]), new CumulativeSum());
      }
      addMetric.invoke(registry, name.apply("lag-ms", "Largest lag of the task's partitions, in milliseconds"),
          (Gauge<Long>) (config, now) -> lagMillis.getAsLong());
      connect = sensors;
      return true;
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new IllegalStateException("Connect's plugin metrics refused Sluice's task metrics: " + e, e);
    }
  }

  private void record(Sensor own, int index, double value) {
    own.record(value);
    Sensor[] c = connect;
    if (c != null) {
      c[index].record(value);
    }
  }

  public void changes(int n) {
    record(changes, 0, n);
  }

  public void heartbeat() {
    record(heartbeats, 1, 1);
  }

  public void parked() {
    record(parked, 2, 1);
  }

  public void historyLost() {
    record(historyLost, 3, 1);
  }

  @Override
  public void close() {
    metrics.close();
  }
}
