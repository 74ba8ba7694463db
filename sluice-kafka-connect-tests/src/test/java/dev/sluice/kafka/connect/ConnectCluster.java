package dev.sluice.kafka.connect;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.testkit.process.ChildJvm;
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
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * A real Kafka Connect distributed cluster for tests: workers in this JVM (started and stopped
 * gracefully) and in child JVMs (killed for real), all in one group on the embedded Kafka, and a
 * small client of the REST API. Worker settings are tuned for tests: short session timeout,
 * rebalance delay and offset flush interval.
 */
final class ConnectCluster implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private final String bootstrap;
  private final String group;
  private final boolean exactlyOnce;
  private final List<Connect<?>> inProcess = new CopyOnWriteArrayList<>();
  private final Map<ChildJvm, String> children = new java.util.concurrent.ConcurrentHashMap<>();
  private final List<String> urls = new CopyOnWriteArrayList<>();

  ConnectCluster(String bootstrap, String group, boolean exactlyOnce) {
    this.bootstrap = bootstrap;
    this.group = group;
    this.exactlyOnce = exactlyOnce;
  }

  Map<String, String> workerProps() {
    Map<String, String> p = new HashMap<>();
    p.put("bootstrap.servers", bootstrap);
    p.put("group.id", group);
    p.put("config.storage.topic", group + "-configs");
    p.put("offset.storage.topic", group + "-offsets");
    p.put("status.storage.topic", group + "-status");
    p.put("config.storage.replication.factor", "1");
    p.put("offset.storage.replication.factor", "1");
    p.put("status.storage.replication.factor", "1");
    p.put("offset.storage.partitions", "3");
    p.put("status.storage.partitions", "1");
    p.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    p.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
    p.put("value.converter.schemas.enable", "false");
    p.put("offset.flush.interval.ms", "300");
    p.put("scheduled.rebalance.max.delay.ms", "500");
    p.put("session.timeout.ms", "6000");
    p.put("heartbeat.interval.ms", "1000");
    p.put("task.shutdown.graceful.timeout.ms", "3000");
    p.put("listeners", "http://localhost:0");
    p.put("plugin.discovery", "service_load");
    if (exactlyOnce) {
      p.put("exactly.once.source.support", "enabled");
    }
    return p;
  }

  /** Starts a worker in this JVM; returns its REST URL. */
  String startWorker() {
    return startWorker(Map.of());
  }

  /** Starts a worker in this JVM with {@code extra} worker properties; returns its REST URL. */
  String startWorker(Map<String, String> extra) {
    Map<String, String> props = workerProps();
    props.putAll(extra);
    Connect<?> c = new ConnectDistributed().startConnect(props);
    inProcess.add(c);
    String url = c.rest().advertisedUrl().toString();
    urls.add(url);
    return url;
  }

  /** Starts a worker in a child JVM (to be killed with SIGKILL); returns it once it serves REST. */
  ChildJvm startChildWorker(String name) {
    return startChildWorker(name, System.getProperty("java.class.path"), Map.of());
  }

  /**
   * Starts a worker in a child JVM on {@code classPath} (which must hold {@link WorkerMain}), with
   * {@code extra} worker properties (a {@code plugin.path}, say); returns it once it serves REST.
   */
  ChildJvm startChildWorker(String name, String classPath, Map<String, String> extra) {
    List<String> args = new ArrayList<>();
    Map<String, String> props = workerProps();
    props.putAll(extra);
    props.forEach((k, v) -> args.add(k + "=" + v));
    ChildJvm child = ChildJvm.startWithClassPath(name,
        List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"), classPath, WorkerMain.class.getName(),
        args.toArray(String[]::new));
    String line = child.awaitLineStartingWith("WORKER-URL ", Duration.ofSeconds(60));
    String url = line.substring("WORKER-URL ".length()).trim();
    children.put(child, url);
    urls.add(url);
    return child;
  }

  /** Kills a child worker with SIGKILL. */
  void kill(ChildJvm child) {
    child.kill();
    urls.remove(children.remove(child));
  }

  /**
   * Stops every worker (in-process ones gracefully, child ones with SIGKILL). The in-process ones
   * stop at the same time: one by one, each would first leave the group and the others rebalance
   * and restart its connectors and tasks, only to stop them next.
   */
  void stopAll() {
    List<Thread> stopping = new ArrayList<>();
    for (Connect<?> c : inProcess) {
      Thread t = new Thread(() -> {
        c.stop();
        c.awaitStop();
      }, "stop-worker");
      t.start();
      stopping.add(t);
    }
    for (Thread t : stopping) {
      try {
        t.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while stopping the workers", e);
      }
    }
    inProcess.clear();
    for (ChildJvm c : children.keySet()) {
      c.kill();
    }
    children.clear();
    urls.clear();
  }

  /** The REST URL of any live worker. */
  String url() {
    return urls.get(0);
  }

  JsonNode put(String path, Object body) {
    return call("PUT", path, body);
  }

  JsonNode get(String path) {
    return call("GET", path, null);
  }

  JsonNode call(String method, String path, Object body) {
    try {
      HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url() + path.replaceFirst("^/", "")))
          .timeout(Duration.ofSeconds(30)).header("Content-Type", "application/json");
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

  /** Creates or updates connector {@code name}. */
  void putConnector(String name, Map<String, String> config) {
    put("/connectors/" + name + "/config", config);
  }

  /**
   * Updates connector {@code name} and then restarts it (with {@code query}, e.g. {@code
   * includeTasks=true}) once the workers have taken the new configuration in: until then Connect
   * refuses a restart with 409 ("Cannot complete request momentarily due to stale configuration"),
   * which asks the client to send it again; any other refusal fails at once.
   */
  void reconfigureAndRestart(String name, Map<String, String> config, String query) {
    putConnector(name, config);
    await().atMost(Duration.ofSeconds(30)).until(() -> {
      JsonNode applied = get("/connectors/" + name + "/config");
      return config.entrySet().stream().allMatch(e -> e.getValue().equals(applied.path(e.getKey()).asText()));
    });
    await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(200)).until(() -> {
      try {
        call("POST", "/connectors/" + name + "/restart?" + query, null);
        return true;
      } catch (IllegalStateException e) {
        if (String.valueOf(e.getMessage()).contains("-> 409:")) {
          return false;
        }
        throw e;
      }
    });
  }

  /** Whether the connector and {@code tasks} tasks are RUNNING (false while the REST API is unsure). */
  boolean running(String name, int tasks) {
    try {
      JsonNode s = get("/connectors/" + name + "/status");
      if (!"RUNNING".equals(s.path("connector").path("state").asText()) || s.path("tasks").size() != tasks) {
        return false;
      }
      for (JsonNode t : s.path("tasks")) {
        if (!"RUNNING".equals(t.path("state").asText())) {
          return false;
        }
      }
      return true;
    } catch (RuntimeException e) {
      return false;
    }
  }

  /** The worker ids running tasks of {@code name}. */
  List<String> taskWorkers(String name) {
    List<String> out = new ArrayList<>();
    get("/connectors/" + name + "/status").path("tasks").forEach(t -> out.add(t.path("worker_id").asText()));
    return out;
  }

  /** A base connector configuration for {@code collections} of database {@code db}. */
  static Map<String, String> connector(String mongoUri, String db, String collections, int partitions, int tasks) {
    Map<String, String> c = base(partitions, tasks);
    c.put("mongodb.connection.string", mongoUri);
    c.put("mongodb.database", db);
    c.put("mongodb.collections", collections);
    return c;
  }

  /**
   * A base connector configuration for PostgreSQL {@code tables} of publication {@code publication}
   * in the database {@code jdbcUrl} names.
   */
  static Map<String, String> postgresConnector(String jdbcUrl, String publication, String tables, int partitions,
      int tasks) {
    Map<String, String> c = base(partitions, tasks);
    c.put("source.type", "postgresql");
    c.put("postgres.url", jdbcUrl);
    c.put("postgres.publication", publication);
    c.put("postgres.tables", tables);
    return c;
  }

  private static Map<String, String> base(int partitions, int tasks) {
    Map<String, String> c = new HashMap<>();
    c.put("connector.class", SluiceSourceConnector.class.getName());
    c.put("tasks.max", Integer.toString(tasks));
    c.put("partitions", Integer.toString(partitions));
    c.put("topic.creation.default.replication.factor", "1");
    c.put("topic.creation.default.partitions", "3");
    c.put("poll.max.wait.ms", "200");
    return c;
  }

  /** The worker id ({@code host:port}) of a child worker, as the status API names it. */
  static String workerId(ChildJvm child) {
    String url = child.output().stream().filter(l -> l.startsWith("WORKER-URL ")).findFirst().orElseThrow()
        .substring("WORKER-URL ".length()).trim();
    return url.replaceFirst("^https?://", "").replaceFirst("/$", "");
  }

  /**
   * Creates connector {@code name} and waits until its {@code tasks} tasks run, some of them on
   * child worker {@code doomed} (the one a test then kills).
   */
  void putConnectorWithTasksOn(ChildJvm doomed, String name, Map<String, String> config, int tasks) {
    String doomedId = workerId(doomed);
    putConnector(name, config);
    await().atMost(Duration.ofSeconds(60)).until(() -> running(name, tasks) && taskWorkers(name).contains(doomedId));
  }

  /**
   * A worker crash under continuous keyed writes: once {@code before} changes are in {@code
   * topic}, child worker {@code doomed} is killed with SIGKILL (mid-stream) and another worker
   * starts; once the {@code tasks} tasks of connector {@code name} all run on other workers, {@code
   * after} more changes are written; then the writes stop and every written change is awaited in
   * the topic (read with read_committed). The caller checks what the topic holds.
   */
  void killWorkerMidStream(ChildJvm doomed, String name, int tasks, KeyedWrites writes, String topic, int before,
      int after) throws InterruptedException {
    String doomedId = workerId(doomed);
    KeyedWrites.Writer writer = writes.startWriting();
    await().atMost(Duration.ofSeconds(60)).until(() -> KeyedWrites.count(KeyedWrites.read(bootstrap, topic)) >= before);
    kill(doomed);
    startWorker();
    await().atMost(Duration.ofSeconds(60)).until(() -> running(name, tasks) && !taskWorkers(name).contains(doomedId));
    int afterRecovery = writes.written();
    await().atMost(Duration.ofSeconds(30)).until(() -> writes.written() >= afterRecovery + after);
    writer.stop();
    await().atMost(Duration.ofSeconds(60)).until(() -> writes.complete(KeyedWrites.read(bootstrap, topic)));
  }

  /**
   * The whole cluster down while changes are written: stops every worker, writes {@code rounds}
   * rounds, starts two workers in this JVM and awaits every written change in {@code topic}.
   */
  void restartAllWhileWriting(KeyedWrites writes, int rounds, String topic) {
    stopAll();
    for (int i = 0; i < rounds; i++) {
      writes.round();
    }
    startWorker();
    startWorker();
    await().atMost(Duration.ofSeconds(60)).until(() -> writes.complete(KeyedWrites.read(bootstrap, topic)));
  }

  @Override
  public void close() {
    stopAll();
    assertThat(children).isEmpty();
  }
}
