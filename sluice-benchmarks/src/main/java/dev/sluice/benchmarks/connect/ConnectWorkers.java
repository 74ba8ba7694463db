package dev.sluice.benchmarks.connect;

import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.kafka.connect.SluiceSourceConnector;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * One Connect distributed group for the benchmarks: its worker properties, a worker in this JVM,
 * and a small client of the REST API of that worker.
 */
final class ConnectWorkers implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final Map<String, String> props;
  private final Connect<?> worker;
  private final String url;

  private ConnectWorkers(Map<String, String> props) {
    this.props = Map.copyOf(props);
    this.worker = new ConnectDistributed().startConnect(new HashMap<>(props));
    this.url = worker.rest().advertisedUrl().toString();
  }

  /**
   * Starts a worker of group {@code group} in this JVM. Failure detection is Connect's default
   * (session timeout 10 s, heartbeat 3 s); {@code rebalanceDelayMs} is how long the group keeps a
   * departed worker's tasks unassigned in case it comes back (Connect's default: 5 minutes).
   */
  static ConnectWorkers start(String bootstrap, String group, boolean exactlyOnce, long rebalanceDelayMs) {
    Map<String, String> p = new HashMap<>();
    p.put("bootstrap.servers", bootstrap);
    p.put("group.id", group);
    p.put("config.storage.topic", group + "-configs");
    p.put("offset.storage.topic", group + "-offsets");
    p.put("status.storage.topic", group + "-status");
    p.put("config.storage.replication.factor", "1");
    p.put("offset.storage.replication.factor", "1");
    p.put("status.storage.replication.factor", "1");
    p.put("offset.storage.partitions", "5");
    p.put("status.storage.partitions", "1");
    // The connector writes Sluice's envelope as a string (value.format=envelope): the relay's bytes.
    p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    p.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
    p.put("offset.flush.interval.ms", "1000");
    p.put("scheduled.rebalance.max.delay.ms", Long.toString(rebalanceDelayMs));
    p.put("listeners", "http://localhost:0");
    p.put("plugin.discovery", "service_load");
    if (exactlyOnce) {
      p.put("exactly.once.source.support", "enabled");
    }
    return new ConnectWorkers(p);
  }

  /** The worker properties, for a worker of the same group in a child JVM. */
  /**
   * What every benchmarked connector sets whatever its source: its task and partition counts, the
   * topic prefix, the relay's envelope as the value ({@code value.format=envelope}, so connector
   * and relay write the same bytes), topics created by Connect (the embedded broker does not
   * auto-create them; the heartbeat topic is one), and exactly-once when asked.
   */
  static Map<String, String> connectorBase(String prefix, int partitions, int tasks, boolean exactlyOnce) {
    Map<String, String> c = new HashMap<>();
    c.put("connector.class", SluiceSourceConnector.class.getName());
    c.put("tasks.max", Integer.toString(tasks));
    c.put("partitions", Integer.toString(partitions));
    c.put("topic.prefix", prefix);
    c.put("value.format", "envelope");
    c.put("topic.creation.default.replication.factor", "1");
    c.put("topic.creation.default.partitions", "3");
    if (exactlyOnce) {
      c.put("exactly.once.support", "required");
    }
    return c;
  }

  Map<String, String> props() {
    return props;
  }

  /** {@code key=value} arguments of {@link ChildWorkerMain}. */
  String[] childArgs() {
    List<String> args = new ArrayList<>();
    props.forEach((k, v) -> args.add(k + "=" + v));
    return args.toArray(String[]::new);
  }

  JsonNode call(String method, String path, Object body) {
    try {
      HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url + path.replaceFirst("^/", "")))
          .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json");
      b.method(method, body == null ? HttpRequest.BodyPublishers.noBody()
          : HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body)));
      HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() >= 300) {
        throw new IllegalStateException(method + " " + path + " -> " + r.statusCode() + ": " + r.body());
      }
      return r.body().isBlank() ? JSON.nullNode() : JSON.readTree(r.body());
    } catch (IOException e) {
      throw new IllegalStateException(method + " " + path + ": " + e, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  void putConnector(String name, Map<String, String> config) {
    call("PUT", "/connectors/" + name + "/config", config);
  }

  /** The connector's state and its tasks' states, or null while the REST API does not know it. */
  JsonNode status(String name) {
    try {
      return call("GET", "/connectors/" + name + "/status", null);
    } catch (IllegalStateException e) {
      return null;
    }
  }

  /** Whether the connector and exactly {@code tasks} tasks are in {@code state}. */
  boolean inState(String name, String state, int tasks) {
    JsonNode s = status(name);
    if (s == null || !state.equals(s.path("connector").path("state").asText()) || s.path("tasks").size() != tasks) {
      return false;
    }
    for (JsonNode t : s.path("tasks")) {
      if (!state.equals(t.path("state").asText())) {
        return false;
      }
    }
    return true;
  }

  /** Task id to the worker id running it. */
  Map<Integer, String> taskWorkers(String name) {
    Map<Integer, String> out = new HashMap<>();
    JsonNode s = status(name);
    if (s != null) {
      s.path("tasks").forEach(t -> out.put(t.path("id").asInt(), t.path("worker_id").asText()));
    }
    return out;
  }

  /** Task id to its configuration, as the connector generated it. */
  Map<Integer, JsonNode> taskConfigs(String name) {
    Map<Integer, JsonNode> out = new HashMap<>();
    call("GET", "/connectors/" + name + "/tasks", null)
        .forEach(t -> out.put(t.path("id").path("task").asInt(), t.path("config")));
    return out;
  }

  /** Stops the connector (its tasks end, offsets stay), then deletes it. */
  void remove(String name, Duration timeout) {
    call("PUT", "/connectors/" + name + "/stop", null);
    await().atMost(timeout).pollInterval(Duration.ofMillis(50)).until(() -> inState(name, "STOPPED", 0));
    call("DELETE", "/connectors/" + name, null);
  }

  @Override
  public void close() {
    worker.stop();
    worker.awaitStop();
  }
}
