package dev.sluice.kafka.connect;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * A Connect distributed worker in a child JVM, so that a test can kill it for real (SIGKILL).
 * Arguments are worker properties as {@code key=value}; prints whether the connector's classes are
 * on its class path, then {@code WORKER-URL <rest url>} once it serves requests.
 */
public final class WorkerMain {
  private WorkerMain() {}

  public static void main(String[] args) {
    Map<String, String> props = new HashMap<>();
    for (String a : args) {
      int eq = a.indexOf('=');
      props.put(a.substring(0, eq), a.substring(eq + 1));
    }
    // Whether the connector could come from the class path rather than plugin.path (PluginDirectoryIT).
    System.out.println("CONNECTOR-ON-CLASS-PATH "
        + (ClassLoader.getSystemResource("dev/sluice/kafka/connect/SluiceSourceConnector.class") != null));
    String metrics = props.remove(DUMP_METRICS);
    Connect<?> connect = new ConnectDistributed().startConnect(props);
    System.out.println("WORKER-URL " + connect.rest().advertisedUrl());
    if (metrics != null) {
      dumpMetrics(metrics);
    }
    connect.awaitStop();
  }

  /**
   * Not a worker property: the JMX pattern of MBeans whose attributes this JVM prints, as {@code
   * METRIC <mbean> <attribute>=<value>}, whenever one changes (checked every 200 ms), so a test
   * can read a child worker's metrics from its output.
   */
  static final String DUMP_METRICS = "sluice.test.dump.metrics";

  private static void dumpMetrics(String pattern) {
    Thread t = new Thread(() -> {
      javax.management.MBeanServer jmx = java.lang.management.ManagementFactory.getPlatformMBeanServer();
      Map<String, String> printed = new HashMap<>();
      while (true) {
        try {
          for (javax.management.ObjectName name : jmx.queryNames(new javax.management.ObjectName(pattern), null)) {
            for (javax.management.MBeanAttributeInfo a : jmx.getMBeanInfo(name).getAttributes()) {
              String line = name + " " + a.getName() + "=" + jmx.getAttribute(name, a.getName());
              if (!line.equals(printed.put(name + " " + a.getName(), line))) {
                System.out.println("METRIC " + line);
              }
            }
          }
          Thread.sleep(200); // the sampling period of this dump
        } catch (InterruptedException e) {
          return;
        } catch (Exception e) {
          System.out.println("METRIC-ERROR " + e);
        }
      }
    }, "metrics-dump");
    t.setDaemon(true);
    t.start();
  }
}
