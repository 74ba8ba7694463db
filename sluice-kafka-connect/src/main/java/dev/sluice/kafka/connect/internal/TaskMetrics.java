package dev.sluice.kafka.connect.internal;

import java.util.LinkedHashMap;
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

  private static final int CHANGES = 0;
  private static final int HEARTBEATS = 1;
  private static final int PARKED = 2;
  private static final int HISTORY_LOST = 3;

  private final Metrics metrics;
  private final LongSupplier lagMillis;
  /** The sensors in this task's own registry, by the indexes above. */
  private final Sensor[] own;
  /** The same sensors in Connect's registry, once {@link #registerWithConnect} found it; else null. */
  private volatile Sensor[] connect;

  /** Where the metrics are defined: this task's own {@link Metrics}, or Connect's plugin metrics. */
  private interface Registry {
    Sensor sensor(String name);

    MetricName name(String metric, String doc);

    void gauge(MetricName name, Gauge<Long> gauge);
  }

  public TaskMetrics(String connector, int task, LongSupplier lagMillis) {
    // In this order, as Connect names its own task MBeans: the MBean's name is the same in every JVM
    // (Map.of's order changes from one JVM to the next), which the JMX exporter's patterns need.
    Map<String, String> tags = new LinkedHashMap<>();
    tags.put("connector", connector);
    tags.put("task", Integer.toString(task));
    this.metrics = new Metrics(new MetricConfig().tags(tags), List.of(new JmxReporter()), Time.SYSTEM,
        new KafkaMetricsContext(DOMAIN));
    this.lagMillis = lagMillis;
    this.own = define(new Registry() {
      @Override
      public Sensor sensor(String name) {
        return metrics.sensor(name);
      }

      @Override
      public MetricName name(String metric, String doc) {
        return metrics.metricName(metric, GROUP, doc);
      }

      @Override
      public void gauge(MetricName name, Gauge<Long> gauge) {
        metrics.addMetric(name, gauge);
      }
    });
  }

  /** Every metric of a task, in {@code registry}; returns its sensors by the indexes above. */
  private Sensor[] define(Registry registry) {
    Sensor[] sensors = new Sensor[4];
    sensors[CHANGES] = registry.sensor("changes");
    sensors[CHANGES].add(registry.name("changes-total", "Changes handed to Connect"), new CumulativeSum());
    sensors[CHANGES].add(registry.name("changes-rate", "Changes handed to Connect per second"), new Rate());
    sensors[HEARTBEATS] = counter(registry, "heartbeats-total", "Heartbeat records sent");
    sensors[PARKED] = counter(registry, "parked-total", "Changes parked to the parked topic");
    sensors[HISTORY_LOST] = counter(registry, "history-lost-total",
        "Times a committed position had fallen off the source's history");
    registry.gauge(registry.name("lag-ms", "Largest lag of the task's partitions, in milliseconds"),
        (config, now) -> lagMillis.getAsLong());
    return sensors;
  }

  private static Sensor counter(Registry registry, String metric, String doc) {
    Sensor s = registry.sensor(metric);
    s.add(registry.name(metric, doc), new CumulativeSum());
    return s;
  }

  /**
   * Registers these metrics in the worker's registry too, where the worker has one for plugins
   * ({@code SourceTaskContext.pluginMetrics()}, Connect 4.1+). Returns whether it did; false on
   * older workers and when the context offers none.
   *
   * @throws IllegalStateException when the worker has the registry but refused a metric
   */
  public boolean registerWithConnect(Object taskContext) {
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
      connect = define(new Registry() {
        @Override
        public Sensor sensor(String name) {
          return (Sensor) invoke(addSensor, name);
        }

        @Override
        public MetricName name(String metric, String doc) {
          return (MetricName) invoke(metricName, metric, doc, new java.util.LinkedHashMap<String, String>());
        }

        @Override
        public void gauge(MetricName name, Gauge<Long> gauge) {
          invoke(addMetric, name, gauge);
        }

        private Object invoke(java.lang.reflect.Method m, Object... args) {
          try {
            return m.invoke(registry, args);
          } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
          }
        }
      });
      return true;
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new IllegalStateException("Connect's plugin metrics refused Sluice's task metrics: " + e, e);
    }
  }

  private void record(int index, double value) {
    own[index].record(value);
    Sensor[] c = connect;
    if (c != null) {
      c[index].record(value);
    }
  }

  public void changes(int n) {
    record(CHANGES, n);
  }

  public void heartbeat() {
    record(HEARTBEATS, 1);
  }

  public void parked() {
    record(PARKED, 1);
  }

  public void historyLost() {
    record(HISTORY_LOST, 1);
  }

  @Override
  public void close() {
    metrics.close();
  }
}
