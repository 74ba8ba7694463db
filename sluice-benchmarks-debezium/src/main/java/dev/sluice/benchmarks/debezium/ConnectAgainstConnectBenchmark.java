package dev.sluice.benchmarks.debezium;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.sluice.testkit.net.Ports;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Connect against Connect (issue 36, target 1): Sluice's source connector and Debezium's PostgreSQL
 * connector on the same Kafka Connect 4.x worker build (this module's class path: Connect 4.3 with
 * both connectors on it), the same broker (the test kit's Kafka in a JVM of its own, {@link
 * BrokerMain}), the same topic settings (3 partitions, created before), the same converter
 * ({@code JsonConverter} for keys and values, without schemas, then with), reading the same
 * backlog of the same table ({@code orders}: text key, int, text; inserted in transactions of
 * 1,000 into a fresh database per variant, after the connector's slot exists).
 *
 * <p>Per variant a fresh worker JVM ({@code ConnectDistributed}, {@code -Xmx1g}, its own group and
 * internal topics; {@code exactly.once.source.support=enabled} in exactly-once mode), so that its
 * resident memory is the connector's alone. The connector is created on the empty table, waited
 * for (Sluice: its offsets pinned; Debezium: its slot active) and paused; then the rows are written,
 * the worker's resident set is read, and the clock runs from the REST {@code resume} to the first
 * and to the last record a {@code read_committed} consumer receives. Memory growth: the largest
 * resident set sampled every 100 ms during the read minus the one before it. Debezium's streaming
 * thread goes on reading into its queue (8,192 records) while its task is paused; Sluice's reads
 * only in {@code poll}: that favours Debezium by up to one queue.
 *
 * <p>Every round runs every variant; warm-up rounds are not counted; a figure is the median of the
 * in-round ratios Sluice / Debezium of the same mode and converter, with their range.
 *
 * <p>Arguments: rows (200,000), warm-up rounds (1), measured rounds (3), with schemas too (1: yes),
 * Sluice with 4 partitions / 4 tasks too (1: yes), Sluice's {@code batch.size} (0: its default; a comma-separated
 * list runs Sluice once with each, against the same Debezium run), modes
 * ({@code both}, {@code alo} or {@code eos}).
 *
 * <p>System properties {@code cac.worker.jvm} and {@code cac.broker.jvm}: the JVM options of the
 * workers ({@code -Xmx1g -XX:+UseG1GC}) and of the broker ({@code -Xmx512m -XX:+UseSerialGC}),
 * space-separated; the smoke test runs both with C1 only and the serial collector, which takes
 * a third less CPU for its few hundred rows.
 *
 * <p>System property {@code cac.worker.jfr}: a folder; each worker then runs a flight recording
 * (JFR, {@code settings=profile}) that is dumped there as {@code <variant>.jfr} before the worker
 * is killed.
 */
public final class ConnectAgainstConnectBenchmark {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final HttpClient HTTP = HttpClient.newHttpClient();
  private static final String DEBEZIUM = DebeziumConfig.CONNECTOR;
  private static final String SLUICE = "dev.sluice.kafka.connect.SluiceSourceConnector";

  private ConnectAgainstConnectBenchmark() {}

  /** One variant: which connector, mode, converter, partitions. */
  record Variant(boolean sluice, boolean exactlyOnce, boolean schemas, int partitions, int batch) {
    String name() {
      return (sluice ? "Sluice" + (partitions > 1 ? " " + partitions + " partitions/tasks" : "")
          + (batch > 0 ? " batch.size=" + batch : "") : "Debezium (1 task)")
          + ", " + (exactlyOnce ? "exactly once" : "at least once") + ", JSON " + (schemas ? "with" : "without")
          + " schemas";
    }
  }

  /** What one run of a variant measured. */
  record Result(double rate, double firstMs, double growthMb, double beforeMb, String cpu) {}

  public static void main(String[] args) throws Exception {
    int rows = args.length > 0 ? Integer.parseInt(args[0]) : 200_000;
    int warmup = args.length > 1 ? Integer.parseInt(args[1]) : 1;
    int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
    boolean withSchemas = args.length <= 3 || "1".equals(args[3]);
    boolean four = args.length <= 4 || "1".equals(args[4]);
    int[] batches = args.length > 5 ? Arrays.stream(args[5].split(",")).mapToInt(Integer::parseInt).toArray()
        : new int[] {0};
    String modes = args.length > 6 ? args[6] : "both";
    List<Variant> variants = new ArrayList<>();
    for (boolean schemas : withSchemas ? new boolean[] {false, true} : new boolean[] {false}) {
      for (boolean eos : new boolean[] {false, true}) {
        if (!"both".equals(modes) && eos != "eos".equals(modes)) {
          continue;
        }
        variants.add(new Variant(false, eos, schemas, 1, 0));
        for (int batch : batches) {
          variants.add(new Variant(true, eos, schemas, 1, batch));
        }
        if (four && !schemas) {
          variants.add(new Variant(true, eos, schemas, 4, batches[0]));
        }
      }
    }
    System.out.printf("%d cores; rows=%d, %d warm-up + %d measured rounds, Sluice batch.size=%s (0: default), modes %s; load: %s%n",
        Runtime.getRuntime().availableProcessors(), rows, warmup, rounds, Arrays.toString(batches), modes,
        load());
    String workerClassPath = System.getProperty("java.class.path");
    Path brokerClassPathFile = Path.of(System.getProperty("sluice.kafka39.classpath",
        "sluice-kafka39-broker/target/broker.classpath"));
    if (!Files.exists(brokerClassPathFile)) {
      brokerClassPathFile = Path.of("..").resolve(brokerClassPathFile);
    }
    String brokerClassPath = Files.readString(brokerClassPathFile).trim() + File.pathSeparator + workerClassPath;
    List<Result[]> measured = new ArrayList<>();
    try (ChildJvm broker = ChildJvm.startWithClassPath("broker", jvmOptions("cac.broker.jvm", "-Xmx512m -XX:+UseSerialGC"),
            brokerClassPath, BrokerMain.class.getName());
        EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String bootstrap = broker.awaitLineStartingWith("BROKER ", Duration.ofMinutes(2)).substring(7).trim();
      for (int r = 1; r <= warmup + rounds; r++) {
        Result[] x = new Result[variants.size()];
        for (int v = 0; v < variants.size(); v++) {
          x[v] = run(pg, bootstrap, broker.pid(), variants.get(v), rows, "r" + r + "v" + v);
          System.out.printf("%s %d, %-80s %,9.0f changes/s, first record %6.0f ms, worker RSS growth %6.1f MB%n"
              + "    CPU seconds during the read: %s; worker RSS before the read %.1f MB%n",
              r <= warmup ? "warm-up" : "round", r <= warmup ? r : r - warmup, variants.get(v).name(), x[v].rate(),
              x[v].firstMs(), x[v].growthMb(), x[v].cpu(), x[v].beforeMb());
        }
        System.out.println("load: " + load());
        if (r > warmup) {
          measured.add(x);
        }
      }
    }
    System.out.printf("%nrows=%d, %d measured rounds; median of in-round ratios Sluice / Debezium [min-max]%n", rows,
        rounds);
    for (int v = 0; v < variants.size(); v++) {
      Variant s = variants.get(v);
      if (!s.sluice()) {
        continue;
      }
      int d = variants.indexOf(new Variant(false, s.exactlyOnce(), s.schemas(), 1, 0));
      double[] thr = new double[measured.size()];
      double[] first = new double[measured.size()];
      double[] mem = new double[measured.size()];
      for (int i = 0; i < measured.size(); i++) {
        Result[] x = measured.get(i);
        thr[i] = x[v].rate() / x[d].rate();
        first[i] = x[v].firstMs() / x[d].firstMs();
        mem[i] = x[v].growthMb() / Math.max(0.1, x[d].growthMb());
      }
      System.out.printf("%s: throughput %s, time to first record %s, worker RSS growth %s%n", s.name(),
          summary(thr), summary(first), summary(mem));
    }
    System.out.println("load: " + load());
  }

  /** The JVM options of a child JVM: system property {@code property} (space-separated) or {@code standard}. */
  private static List<String> jvmOptions(String property, String standard) {
    String options = System.getProperty(property, "").trim();
    return new ArrayList<>(List.of((options.isEmpty() ? standard : options).split("\\s+")));
  }

  private static String summary(double[] x) {
    double[] s = x.clone();
    Arrays.sort(s);
    if (s.length == 0) {
      return "n/a";
    }
    double median = s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    return String.format("%.2fx [%.2f-%.2f]", median, s[0], s[s.length - 1]);
  }

  private static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).trim();
    } catch (IOException e) {
      return "?";
    }
  }

  private static Result run(EmbeddedPostgresServer pg, String bootstrap, long brokerPid, Variant v, int rows,
      String tag) throws Exception {
    String db = pg.createDatabase("cac_" + tag);
    DataSource ds = pg.dataSource(db);
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL, note text)");
      st.execute("CREATE PUBLICATION bench_pub FOR TABLE orders");
    }
    String group = "cac-" + tag;
    int port = Ports.free();
    Properties w = new Properties();
    w.setProperty("bootstrap.servers", bootstrap);
    w.setProperty("group.id", group);
    w.setProperty("config.storage.topic", group + "-configs");
    w.setProperty("offset.storage.topic", group + "-offsets");
    w.setProperty("status.storage.topic", group + "-status");
    for (String t : List.of("config", "offset", "status")) {
      w.setProperty(t + ".storage.replication.factor", "1");
    }
    w.setProperty("offset.storage.partitions", "5");
    w.setProperty("status.storage.partitions", "1");
    for (String k : List.of("key", "value")) {
      w.setProperty(k + ".converter", "org.apache.kafka.connect.json.JsonConverter");
      w.setProperty(k + ".converter.schemas.enable", Boolean.toString(v.schemas()));
    }
    w.setProperty("offset.flush.interval.ms", "1000");
    w.setProperty("listeners", "http://localhost:" + port);
    w.setProperty("plugin.discovery", "service_load"); // both connectors ship a service manifest
    if (v.exactlyOnce()) {
      w.setProperty("exactly.once.source.support", "enabled");
    }
    Path props = Files.createTempFile("cac-worker", ".properties");
    try (var out = Files.newOutputStream(props)) {
      w.store(out, null);
    }
    String base = "http://localhost:" + port;
    String topicPrefix = (v.sluice() ? "s-" : "d-") + tag;
    String topic = v.sluice() ? topicPrefix + "." + db + ".public.orders" : topicPrefix + ".public.orders";
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get();
    }
    List<String> jvm = jvmOptions("cac.worker.jvm", "-Xmx1g -XX:+UseG1GC");
    String jfr = System.getProperty("cac.worker.jfr", "").trim(); // a folder: a flight recording per worker
    if (!jfr.isEmpty()) {
      jvm.add("-XX:StartFlightRecording=name=cac,settings=profile");
    }
    try (ChildJvm worker = ChildJvm.startWithClassPath("worker-" + tag, jvm,
        System.getProperty("java.class.path"), "org.apache.kafka.connect.cli.ConnectDistributed", props.toString());
        KafkaConsumer<byte[], byte[]> consumer = consumer(bootstrap, topic)) {
      try {
        await(Duration.ofMinutes(3), () -> get(base + "/") != null, worker, "the worker's REST API");
        String name = (v.sluice() ? "sluice-" : "debezium-") + tag;
        Map<String, String> c = v.sluice() ? sluice(pg, db, v, topicPrefix, v.batch()) : debezium(pg, db, v, topicPrefix,
            "dbz_" + tag);
        send("PUT", base + "/connectors/" + name + "/config", JSON.writeValueAsString(c));
        int tasks = v.partitions();
        await(Duration.ofMinutes(3), () -> running(base, name, "RUNNING", tasks) && (v.sluice()
            ? offsets(base, name) == tasks : slotActive(ds, "dbz_" + tag)), worker, name + " running");
        send("PUT", base + "/connectors/" + name + "/pause", null);
        await(Duration.ofMinutes(1), () -> running(base, name, "PAUSED", tasks), worker, name + " paused");
        insert(ds, rows);
        long before = rss(worker.pid(), "VmRSS");
        Cpu cpuBefore = Cpu.read(worker.pid(), brokerPid);
        long start = System.nanoTime();
        send("PUT", base + "/connectors/" + name + "/resume", null);
        long first = 0;
        long seen = 0;
        long peak = before;
        long lastSample = 0;
        long deadline = start + Duration.ofMinutes(10).toNanos();
        while (seen < rows) {
          ConsumerRecords<byte[], byte[]> got = consumer.poll(Duration.ofMillis(20));
          long now = System.nanoTime();
          if (!got.isEmpty() && first == 0) {
            first = now;
          }
          seen += got.count();
          if (now - lastSample > 100_000_000L) {
            peak = Math.max(peak, rss(worker.pid(), "VmRSS"));
            lastSample = now;
          }
          if (now > deadline || !worker.isAlive()) {
            throw new IllegalStateException(name + " delivered " + seen + " of " + rows + " records; worker output:\n"
                + tail(worker));
          }
        }
        long end = System.nanoTime();
        peak = Math.max(peak, rss(worker.pid(), "VmRSS"));
        String cpu = Cpu.read(worker.pid(), brokerPid).since(cpuBefore, (end - start) / 1e9);
        return new Result(rows / ((end - start) / 1e9), (first - start) / 1e6, (peak - before) / 1024.0,
            before / 1024.0, cpu);
      } finally {
        if (!jfr.isEmpty()) { // the worker is killed, so its recording is dumped first
          Path file = Path.of(jfr, (v.sluice() ? "sluice-" : "debezium-") + tag + ".jfr").toAbsolutePath();
          new ProcessBuilder("jcmd", Long.toString(worker.pid()), "JFR.dump", "name=cac", "filename=" + file)
              .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start()
              .waitFor(2, java.util.concurrent.TimeUnit.MINUTES);
        }
        worker.kill();
        Files.deleteIfExists(props);
        pg.dropReplicationSlots(db);
      }
    }
  }

  private static Map<String, String> sluice(EmbeddedPostgresServer pg, String db, Variant v, String prefix,
      int batch) {
    Map<String, String> c = new LinkedHashMap<>();
    c.put("connector.class", SLUICE);
    c.put("tasks.max", Integer.toString(v.partitions()));
    c.put("partitions", Integer.toString(v.partitions()));
    c.put("topic.prefix", prefix);
    c.put("source.type", "postgresql");
    c.put("postgres.url", pg.jdbcUrl(db));
    c.put("postgres.user", EmbeddedPostgresServer.USER);
    c.put("postgres.publication", "bench_pub");
    c.put("postgres.tables", "public.orders");
    topicCreation(c);
    if (batch > 0) {
      c.put("batch.size", Integer.toString(batch));
    }
    if (v.exactlyOnce()) {
      c.put("exactly.once.support", "required");
    }
    return c;
  }

  private static Map<String, String> debezium(EmbeddedPostgresServer pg, String db, Variant v, String prefix,
      String slot) {
    Map<String, String> c = new LinkedHashMap<>();
    c.put("connector.class", DEBEZIUM);
    c.put("tasks.max", "1");
    c.putAll(DebeziumConfig.postgres(pg.port(), db, prefix, slot, "bench_pub"));
    c.put("table.include.list", "public.orders");
    topicCreation(c);
    if (v.exactlyOnce()) {
      c.put("exactly.once.support", "required");
    }
    return c;
  }

  /** Connect's topic creation, the same for both: for topics not created before (Sluice's heartbeats). */
  private static void topicCreation(Map<String, String> c) {
    c.put("topic.creation.default.replication.factor", "1");
    c.put("topic.creation.default.partitions", "3");
  }

  private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String topic) {
    KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(Map.of("bootstrap.servers", bootstrap,
        "isolation.level", "read_committed", "enable.auto.commit", "false"), new ByteArrayDeserializer(),
        new ByteArrayDeserializer());
    List<TopicPartition> parts = new ArrayList<>();
    for (int p = 0; p < 3; p++) {
      parts.add(new TopicPartition(topic, p));
    }
    c.assign(parts);
    c.seekToBeginning(parts);
    return c;
  }

  private static void insert(DataSource ds, int rows) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement s = c.prepareStatement("INSERT INTO orders (id, amount, note) VALUES (?, ?, ?)")) {
      c.setAutoCommit(false);
      for (int i = 0; i < rows; i++) {
        s.setString(1, "o" + i);
        s.setInt(2, i);
        s.setString(3, "order number " + i + " of the benchmark");
        s.addBatch();
        if ((i + 1) % 1000 == 0 || i == rows - 1) {
          s.executeBatch();
          c.commit();
        }
      }
    }
  }

  private static boolean slotActive(DataSource ds, String slot) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement s = c.prepareStatement("SELECT active FROM pg_replication_slots WHERE slot_name = ?")) {
      s.setString(1, slot);
      try (ResultSet rs = s.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  private static boolean running(String base, String name, String state, int tasks) throws IOException {
    JsonNode s = get(base + "/connectors/" + name + "/status");
    if (s == null || !state.equals(s.path("connector").path("state").asText())) {
      return false;
    }
    int n = 0;
    for (JsonNode t : s.path("tasks")) {
      if ("FAILED".equals(t.path("state").asText())) {
        throw new IllegalStateException(name + " task failed: " + t.path("trace").asText());
      }
      n += state.equals(t.path("state").asText()) ? 1 : 0;
    }
    return n == tasks;
  }

  private static int offsets(String base, String name) throws IOException {
    JsonNode o = get(base + "/connectors/" + name + "/offsets");
    return o == null ? 0 : o.path("offsets").size();
  }

  private static JsonNode get(String url) throws IOException {
    try {
      HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(30))
          .GET().build(), HttpResponse.BodyHandlers.ofString());
      return r.statusCode() == 200 ? JSON.readTree(r.body()) : null;
    } catch (java.net.ConnectException e) {
      return null;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
  }

  private static void send(String method, String url, String body) throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(60))
        .header("Content-Type", "application/json");
    b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
    HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() >= 300) {
      throw new IllegalStateException(method + " " + url + ": " + r.statusCode() + " " + r.body());
    }
  }

  private interface Check {
    boolean ok() throws Exception;
  }

  private static void await(Duration atMost, Check check, ChildJvm worker, String what) throws Exception {
    long deadline = System.nanoTime() + atMost.toNanos();
    while (!check.ok()) {
      if (System.nanoTime() > deadline || !worker.isAlive()) {
        throw new IllegalStateException("Timed out waiting for " + what + "; worker output:\n" + tail(worker));
      }
      Thread.sleep(50); // a benchmark's polling loop, not a test
    }
  }

  private static String tail(ChildJvm worker) {
    List<String> out = worker.output();
    return String.join("\n", out.subList(Math.max(0, out.size() - 80), out.size()));
  }

  /**
   * CPU time used so far (Linux {@code /proc}, clock ticks) by the worker, the broker, every
   * PostgreSQL process (the WAL sender decoding the slot among them), this JVM (the consumer), and
   * the whole machine: where a read's time goes on a machine the four share.
   */
  record Cpu(long worker, long broker, Map<Long, Long> postgres, long bench, long machineBusy, long machineAll) {
    private static final double TICK = 100.0; // USER_HZ on Linux

    static Cpu read(long workerPid, long brokerPid) throws IOException {
      Map<Long, Long> postgres = new HashMap<>();
      try (var dirs = Files.list(Path.of("/proc"))) {
        for (Path d : (Iterable<Path>) dirs::iterator) {
          String name = d.getFileName().toString();
          if (name.chars().allMatch(Character::isDigit)) {
            try {
              String stat = Files.readString(d.resolve("stat"));
              if (stat.contains("(postgres)")) {
                postgres.put(Long.parseLong(name), ticks(stat));
              }
            } catch (IOException gone) {
              // the process ended meanwhile
            }
          }
        }
      }
      String[] all = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
      long busy = 0;
      long total = 0;
      for (int i = 1; i < all.length && i <= 8; i++) {
        long t = Long.parseLong(all[i]);
        total += t;
        if (i != 4 && i != 5) { // idle, iowait
          busy += t;
        }
      }
      return new Cpu(ticks(workerPid), ticks(brokerPid), postgres, ticks(ProcessHandle.current().pid()), busy, total);
    }

    private static long ticks(long pid) throws IOException {
      return ticks(Files.readString(Path.of("/proc", Long.toString(pid), "stat")));
    }

    /** utime + stime: fields 14 and 15, counted after the command name's closing parenthesis. */
    private static long ticks(String stat) {
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    }

    String since(Cpu b, double wallSeconds) {
      // PostgreSQL: the processes alive at the end (a backend that ended during the read is not counted)
      long pg = 0;
      for (Map.Entry<Long, Long> e : postgres.entrySet()) {
        pg += e.getValue() - b.postgres.getOrDefault(e.getKey(), 0L);
      }
      return String.format("worker %.1f, PostgreSQL %.1f, broker %.1f, consumer %.1f; machine busy %.0f %% of %.1f s x %d cores",
          (worker - b.worker) / TICK, pg / TICK, (broker - b.broker) / TICK, (bench - b.bench) / TICK,
          100.0 * (machineBusy - b.machineBusy) / Math.max(1, machineAll - b.machineAll), wallSeconds,
          Runtime.getRuntime().availableProcessors());
    }
  }

  /** A process's resident set ({@code VmRSS}) in kB from /proc. */
  private static long rss(long pid, String field) throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
      if (line.startsWith(field + ":")) {
        return Long.parseLong(line.replaceAll("[^0-9]", ""));
      }
    }
    throw new IllegalStateException("no " + field + " for process " + pid);
  }
}
