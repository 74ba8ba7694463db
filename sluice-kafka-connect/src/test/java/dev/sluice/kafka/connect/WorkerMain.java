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
    Connect<?> connect = new ConnectDistributed().startConnect(props);
    System.out.println("WORKER-URL " + connect.rest().advertisedUrl());
    connect.awaitStop();
  }
}
