package dev.sluice.benchmarks.connect;

import java.util.HashMap;
import java.util.Map;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * A Connect distributed worker in a child JVM, for the resume measurement to kill with SIGKILL.
 * Arguments are worker properties as {@code key=value}; prints {@code WORKER-URL <rest url>} once
 * it serves requests.
 */
public final class ChildWorkerMain {
  private ChildWorkerMain() {}

  public static void main(String[] args) {
    Map<String, String> props = new HashMap<>();
    for (String a : args) {
      int eq = a.indexOf('=');
      props.put(a.substring(0, eq), a.substring(eq + 1));
    }
    Connect<?> connect = new ConnectDistributed().startConnect(props);
    System.out.println("WORKER-URL " + connect.rest().advertisedUrl());
    connect.awaitStop();
  }
}
