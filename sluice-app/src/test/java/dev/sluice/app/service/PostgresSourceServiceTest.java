package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.app.Main;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.sink.Envelope;
import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.process.ChildJvm;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import dev.sluice.testkit.sql.Jdbc;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 13 item 5: {@code sluice run} with a {@code postgres} source, on a real PostgreSQL
 * (embedded, logical replication) and Kafka. The existing rows of a table (snapshot bootstrap) and
 * every later insert, update and delete arrive once, numerics exact; the configuration refuses
 * what a postgres (or mongodb) source cannot do with one line naming the key; a PostgreSQL server
 * stopped under the running service makes it not ready, the process stays up and nothing written
 * before or after the outage is lost.
 */
class PostgresSourceServiceTest {
  private static final AtomicInteger DATABASES = new AtomicInteger();
  private static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
  private static EmbeddedKafka kafka;

  @TempDir Path dir;

  @BeforeAll
  static void startKafka() {
    kafka = EmbeddedKafka.start();
  }

  @AfterAll
  static void stopKafka() {
    if (kafka != null) {
      kafka.close();
    }
  }

  private static long count(String url, String query) throws Exception {
    return Long.parseLong(Jdbc.queryOne(url, query));
  }

  private static String config(String url, String topic, String bootstrap) {
    return """
        postgres:
          url: "%s"
          user: postgres
          password: ""
          publication: shop_pub
        http: { port: 0 }
        listeners:
          - table: public.orders
            bootstrap: %s
            partitions: 2
            leaseDuration: 3s
            checkpoint: { every: 20, maxDelay: 200ms }
            onFailure: park
            sink:
              kafka: { bootstrapServers: "%s", topic: %s }
        """.formatted(url, bootstrap, kafka.bootstrapServers(), topic);
  }

  private static HttpResponse<String> get(String base, String path) throws Exception {
    return HTTP.send(HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(10)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** The distinct envelopes of {@code topic} (by id), after {@code count} records arrived or 60 s. */
  private static Map<String, Envelope> envelopes(String topic, int count) {
    Map<String, Envelope> byId = new LinkedHashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : kafka.readAll(topic, count, Duration.ofSeconds(60))) {
      Envelope e = Envelope.parse(r.value());
      byId.putIfAbsent(e.id(), e);
    }
    return byId;
  }

  private static Set<String> keys(String topic, int count) {
    Set<String> keys = new HashSet<>();
    kafka.readAll(topic, count, Duration.ofSeconds(2)).forEach(r -> keys.add(new String(r.key(), StandardCharsets.UTF_8)));
    return keys;
  }

  /**
   * Issue 37 item 5: every stop of a PostgreSQL source logged "connection marked as broken" with a
   * stack trace (HikariCP). A listener closes its release watch without waiting for it (its wait
   * for notifications ends within half a second), and the service then closed the pool under the
   * connection the watch still held; HikariCP aborted it and logged the warning when the watch gave
   * it back. The source's close now waits (bounded) for the pool's connections to come back first.
   */
  @Test
  void closingThePoolRightAfterAReleaseWatchLogsNoWarning() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("svcwatch" + DATABASES.incrementAndGet());
    String url = pg.jdbcUrl(db);
    Jdbc.execute(url, "CREATE TABLE orders (id text PRIMARY KEY, n int)", "CREATE PUBLICATION shop_pub FOR TABLE orders");
    Path file = dir.resolve("watch.yaml");
    Files.writeString(file, config(url, "pg-watch", "snapshot"));
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> log =
        new ch.qos.logback.core.read.ListAppender<>();
    log.start();
    ch.qos.logback.classic.Logger root =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    root.addAppender(log);
    try {
      Wiring<?> wiring = Wiring.connect(ConfigLoader.load(file), true);
      try {
        wiring.leaseStore().list(""); // the lease table exists
        AutoCloseable watch = wiring.leaseStore().watchReleases("kafka-pg-watch/", name -> { });
        await().atMost(Duration.ofSeconds(10)).until(() -> watchThreads() == 1);
        watch.close(); // as a closing listener does: its thread ends after its current wait
      } finally {
        wiring.close();
      }
      await().atMost(Duration.ofSeconds(10)).until(() -> watchThreads() == 0);
    } finally {
      root.detachAppender(log);
    }
    List<String> problems;
    synchronized (log.list) {
      problems = log.list.stream().filter(e -> e.getLevel().isGreaterOrEqual(ch.qos.logback.classic.Level.WARN))
          .map(e -> e.getLevel() + " " + e.getLoggerName() + ": " + e.getFormattedMessage()).toList();
    }
    assertThat(problems).as("warnings and errors while the source closed").isEmpty();
  }

  /**
   * {@code postgres.sessionLiveness} (ADR 0114) reaches the service's lease store: a lease it grants
   * records the process's database session and the bound, and closing the service gives the
   * liveness connection back before the pool closes (no warning).
   */
  @Test
  void sessionLivenessInTheFileRecordsTheSessionInTheServicesLeases() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("svcsession" + DATABASES.incrementAndGet());
    String url = pg.jdbcUrl(db);
    Jdbc.execute(url, "CREATE TABLE orders (id text PRIMARY KEY, n int)", "CREATE PUBLICATION shop_pub FOR TABLE orders");
    Path file = dir.resolve("session.yaml");
    Files.writeString(file, config(url, "pg-session", "snapshot")
        .replace("  publication: shop_pub\n", "  publication: shop_pub\n  sessionLiveness: 500ms\n"));
    Wiring<?> wiring = Wiring.connect(ConfigLoader.load(file), true);
    try {
      assertThat(wiring.leaseStore()).as("one store for the process").isSameAs(wiring.leaseStore());
      assertThat(wiring.leaseStore().tryAcquire("kafka-pg-session/public.orders#0of2", "svc", Duration.ofSeconds(5)))
          .isPresent();
      assertThat(count(url, "SELECT count(*) FROM sluice_lease WHERE holder_pid IS NOT NULL AND holder_bound_ms = 500"))
          .as("the lease records the session and its bound").isEqualTo(1);
      assertThat(sessionThreads()).isEqualTo(1);
    } finally {
      wiring.close();
    }
    await().atMost(Duration.ofSeconds(10)).until(() -> sessionThreads() == 0);
  }

  private static long sessionThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().equals("sluice-lease-session")).count();
  }

  private static long watchThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith("sluice-release-watch-")).count();
  }

  @Test
  void existingRowsByASnapshotThenEveryChangeArriveOnceWithExactNumbersAndTheServiceIsReady() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("svc" + DATABASES.incrementAndGet());
    String url = pg.jdbcUrl(db);
    try {
      Jdbc.execute(url, "CREATE TABLE orders (id int PRIMARY KEY, amount numeric(30,10), note text)",
          "CREATE PUBLICATION shop_pub FOR TABLE orders",
          "INSERT INTO orders SELECT g, 12345678901234567890.0123456789 + g, 'existing' FROM generate_series(1, 50) g");
      kafka.createTopic("pg-orders", 2);
      Path file = dir.resolve("sluice.yaml");
      Files.writeString(file, config(url, "pg-orders", "snapshot"));

      try (SluiceService service = SluiceService.start(ConfigLoader.load(file), new SimpleMeterRegistry())) {
        String base = "http://127.0.0.1:" + service.httpAddress().orElseThrow().getPort();
        await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
        assertThat(get(base, "/health/ready").body()).contains("\"status\" : \"UP\"");

        Jdbc.execute(url, "INSERT INTO orders SELECT g, 0.1000000000000000055511151231257827, 'new' FROM generate_series(51, 60) g",
            "UPDATE orders SET note = 'updated' WHERE id % 10 = 0",
            "DELETE FROM orders WHERE id IN (3, 33, 55)");
        int total = 50 + 10 + 6 + 3;
        await().atMost(Duration.ofSeconds(60)).until(() -> envelopes("pg-orders", total).size() == total);

        // Once each: no second copy of any change arrives after the last one (3 s more of reading).
        List<ConsumerRecord<byte[], byte[]>> records = kafka.readAll("pg-orders", total + 1, Duration.ofSeconds(3));
        assertThat(records).as("records on the topic").hasSize(total);
        Map<String, List<String>> perKey = new LinkedHashMap<>();
        Set<String> ids = new HashSet<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
          Envelope e = Envelope.parse(r.value());
          assertThat(ids.add(e.id())).as("envelope id %s distinct", e.id()).isTrue();
          assertThat(e.stream()).isEqualTo("public.orders");
          perKey.computeIfAbsent(e.key(), k -> new ArrayList<>())
              .add(e.operation() + (e.document() == null ? "" : ":" + e.document().get("note").asText()));
        }
        assertThat(perKey).as("every row").hasSize(60);
        assertThat(perKey.get("public.orders[\"7\"]")).containsExactly("SNAPSHOT:existing");
        assertThat(perKey.get("public.orders[\"10\"]")).containsExactly("SNAPSHOT:existing", "UPDATE:updated");
        assertThat(perKey.get("public.orders[\"33\"]")).containsExactly("SNAPSHOT:existing", "DELETE");
        assertThat(perKey.get("public.orders[\"55\"]")).containsExactly("INSERT:new", "DELETE");
        assertThat(perKey.get("public.orders[\"60\"]")).containsExactly("INSERT:new", "UPDATE:updated");
        String seven = records.stream().filter(r -> new String(r.key(), StandardCharsets.UTF_8).equals("public.orders[\"7\"]"))
            .map(r -> new String(r.value(), StandardCharsets.UTF_8)).findFirst().orElseThrow();
        assertThat(seven).as("numeric(30,10) with every digit").contains("\"amount\":12345678901234567897.0123456789");
        String fiftyOne = records.stream().filter(r -> new String(r.key(), StandardCharsets.UTF_8).equals("public.orders[\"51\"]"))
            .map(r -> new String(r.value(), StandardCharsets.UTF_8)).findFirst().orElseThrow();
        assertThat(fiftyOne).contains("\"amount\":0.1000000000");

        // Leases and dead letters live in the same database; the status names the table.
        assertThat(service.leases()).extracting(r -> r.name())
            .contains("kafka-pg-orders/public.orders#0of2", "kafka-pg-orders/public.orders#1of2");
        assertThat(count(url, "SELECT count(*) FROM sluice_deadletters")).isZero();
        assertThat(get(base, "/status").body()).contains("\"table\" : \"public.orders\"").contains("\"parked\" : 0");
        // Operators see how much WAL each partition's slot keeps (issue 13 item 4).
        String slot = "sluice_" + db + "_kafka_pg_orders_public_orders_0of2";
        assertThat(get(base, "/metrics").body())
            .containsPattern("sluice_pg_slot_retained_bytes\\{.*slot=\"" + slot + "\".*\\} [0-9.E]+")
            .contains("sluice_pg_slot_safe_bytes");
        // Every metric and label the shipped dashboard and alert rules ask for is exported.
        MonitoringFiles.assertExported(MonitoringFiles.queries(), get(base, "/metrics").body(), metric -> true);
        // ... and /status too, per slot (issue 33).
        assertThat(get(base, "/status").body()).contains("\"slot\" : \"" + slot + "\"")
            .containsPattern("\"retainedBytes\" : [0-9]+").contains("\"historyLost\" : false");
      }

      // The dead-letter command reads the same table through the same configuration.
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      PrintStream original = System.out;
      int code;
      try {
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        code = Main.commandLine().execute("dead-letters", "list", "--config", file.toString(), "--table", "public.orders");
      } finally {
        System.setOut(original);
      }
      assertThat(code).isZero();
      assertThat(out.toString(StandardCharsets.UTF_8)).contains("0 parked change(s) in kafka-pg-orders/public.orders");

      // The status command reads the leases of the configuration's source.
      StringWriter status = new StringWriter();
      StringWriter err = new StringWriter();
      code = Main.commandLine().setOut(new PrintWriter(status)).setErr(new PrintWriter(err))
          .execute("status", "--config", file.toString());
      assertThat(code).as("stderr: %s", err).isZero();
      assertThat(status.toString()).contains("kafka-pg-orders").contains("public.orders").contains("0/2")
          .contains("1/2");
      code = Main.commandLine().setOut(new PrintWriter(new StringWriter())).setErr(new PrintWriter(err))
          .execute("status", "--config", file.toString(), "--mongo", "mongodb://localhost");
      assertThat(code).isEqualTo(Main.EXIT_USAGE);
      assertThat(err.toString()).contains("--config replaces --mongo and --database");

      // A replay of the current rows to another topic: every row once, as SNAPSHOT, numbers exact.
      kafka.createTopic("pg-orders-now", 1);
      long rows = count(url, "SELECT count(*) FROM orders");
      out.reset();
      try {
        System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
        code = Main.commandLine().execute("replay", "--config", file.toString(), "--table", "public.orders",
            "--from", "current", "--to", "pg-orders-now");
      } finally {
        System.setOut(original);
      }
      assertThat(code).isZero();
      assertThat(out.toString(StandardCharsets.UTF_8)).contains("replayed the current state, " + rows + " document(s) or row(s)");
      Map<String, Envelope> now = envelopes("pg-orders-now", (int) rows);
      assertThat(now).hasSize((int) rows);
      assertThat(now.values()).allSatisfy(e -> assertThat(e.operation()).isEqualTo("SNAPSHOT"));
      assertThat(now.values()).extracting(Envelope::key).doesNotHaveDuplicates();
      assertThat(kafka.readAll("pg-orders-now", (int) rows, Duration.ofSeconds(5)).stream()
          .map(r -> new String(r.value(), StandardCharsets.UTF_8)))
          .anyMatch(body -> body.contains("\"amount\":12345678901234567891.0123456789"));
    } finally {
      pg.dropReplicationSlots(db);
    }
  }

  private static final String PG_VALID = """
      postgres:
        url: jdbc:postgresql://127.0.0.1:1/shop
        user: sluice
        password: s3cret
        publication: shop_pub
      http: { enabled: false }
      listeners:
        - table: public.orders
          bootstrap: snapshot
          sink:
            kafka: { bootstrapServers: "localhost:9092", topic: orders }
      """;

  private static final String MONGO_SECTION = """
      mongodb:
        uri: mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500
        database: shop
      """;

  static Stream<Arguments> badConfigurations() {
    String listeners = PG_VALID.substring(PG_VALID.indexOf("http:"));
    String mongo = MONGO_SECTION + listeners.replace("- table: public.orders", "- collection: orders")
        .replace("bootstrap: snapshot", "bootstrap: oldest");
    return Stream.of(
        Arguments.of("both sources", MONGO_SECTION + PG_VALID, new String[] {"mongodb and postgres", "exactly one"}),
        Arguments.of("no source", listeners, new String[] {"mongodb or postgres", "is required", "exactly one"}),
        Arguments.of("collection under postgres", PG_VALID.replace("- table: public.orders", "- collection: orders"),
            new String[] {"listeners[0].collection", "is for a mongodb source", "table: public.orders"}),
        Arguments.of("collection and table under postgres",
            PG_VALID.replace("- table: public.orders", "- table: public.orders\n    collection: orders"),
            new String[] {"listeners[0].collection", "is for a mongodb source"}),
        Arguments.of("no table under postgres", PG_VALID.replace("- table: public.orders\n    bootstrap", "- bootstrap"),
            new String[] {"listeners[0].table", "is required"}),
        Arguments.of("a table without its schema", PG_VALID.replace("table: public.orders", "table: orders"),
            new String[] {"listeners[0].table", "schema.table", "'orders'"}),
        Arguments.of("a table under mongodb", mongo.replace("- collection: orders", "- table: public.orders"),
            new String[] {"listeners[0].table", "is for a postgres source"}),
        Arguments.of("a bootstrap time under postgres", PG_VALID.replace("bootstrap: snapshot",
            "bootstrap: 2026-01-01T00:00:00Z"), new String[] {"listeners[0].bootstrap", "2026-01-01T00:00:00Z",
                "not supported by a postgres source", "oldest, latest or snapshot"}),
        Arguments.of("an unknown bootstrap", PG_VALID.replace("bootstrap: snapshot", "bootstrap: everything"),
            new String[] {"listeners[0].bootstrap", "'everything'"}),
        Arguments.of("a malformed JDBC URL with a password in it", PG_VALID.replace(
            "jdbc:postgresql://127.0.0.1:1/shop", "\"jdbc:postgres://db/shop?user=app&password=s3cret\""),
            new String[] {"postgres.url", "must be a PostgreSQL JDBC URL", "password=****"}),
        Arguments.of("a connection string that is not JDBC", PG_VALID.replace(
            "jdbc:postgresql://127.0.0.1:1/shop", "\"postgresql://app:s3cret@db/shop\""),
            new String[] {"postgres.url", "must be a PostgreSQL JDBC URL", "app:****@"}),
        Arguments.of("a JDBC URL with a bad port", PG_VALID.replace("127.0.0.1:1/", "127.0.0.1:port/"),
            new String[] {"postgres.url", "must be a PostgreSQL JDBC URL"}),
        Arguments.of("no url", PG_VALID.replace("  url: jdbc:postgresql://127.0.0.1:1/shop\n", ""),
            new String[] {"postgres.url", "is required"}),
        Arguments.of("no publication", PG_VALID.replace("  publication: shop_pub\n", ""),
            new String[] {"postgres.publication", "is required"}),
        Arguments.of("a misspelt publication key", PG_VALID.replace("publication:", "publicaton:"),
            new String[] {"unknown key 'publicaton'", "did you mean 'publication'?"}),
        Arguments.of("no user", PG_VALID.replace("  user: sluice\n", ""), new String[] {"postgres.user", "is required"}),
        Arguments.of("a session liveness below 100 ms", PG_VALID.replace("  publication: shop_pub\n",
            "  publication: shop_pub\n  sessionLiveness: 10ms\n"),
            new String[] {"postgres.sessionLiveness", "must be off or between 100ms and 1h", "'10ms'"}),
        Arguments.of("a session liveness that is no duration", PG_VALID.replace("  publication: shop_pub\n",
            "  publication: shop_pub\n  sessionLiveness: soon\n"),
            new String[] {"postgres.sessionLiveness", "'soon' is not a duration"}),
        Arguments.of("a misspelt table key", PG_VALID.replace("- table:", "- tables:"),
            new String[] {"listeners[0].tables", "unknown key 'tables'", "did you mean 'table'?"}),
        Arguments.of("onInvalidate under postgres", PG_VALID.replace("bootstrap: snapshot",
            "bootstrap: snapshot\n    onInvalidate: stop"), new String[] {"listeners[0].onInvalidate", "mongodb"}),
        Arguments.of("two groups that map to one replication slot", PG_VALID.replace("""
              - table: public.orders
                bootstrap: snapshot
            """, """
              - table: public.orders
                group: idx.v1
                sink:
                  kafka: { bootstrapServers: "localhost:9092", topic: orders2 }
              - table: public.orders
                group: idx_v1
                bootstrap: snapshot
            """), new String[] {"listeners[0] and listeners[1]", "group 'idx.v1'", "group 'idx_v1'",
                "map to the same replication slots"}));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badConfigurations")
  void aConfigurationAPostgresSourceCannotRunIsOneClearLineNamingTheKey(String name, String yaml, String[] says)
      throws Exception {
    Path file = dir.resolve("sluice.yaml");
    Files.writeString(file, yaml);
    StringWriter err = new StringWriter();
    int exit = Main.commandLine().setErr(new PrintWriter(err)).setOut(new PrintWriter(new StringWriter()))
        .execute("run", "--config", file.toString());
    String text = err.toString();
    assertThat(exit).as("exit code; stderr: %s", text).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(text).as("stderr").doesNotContain("s3cret").doesNotContain("\tat ").doesNotContain("Exception");
    assertThat(text.strip().lines()).as("stderr").hasSize(1);
    assertThat(text.strip()).startsWith("sluice run: configuration error: " + file).contains(says);
    assertThat(text).as("known keys are the file's, not helper methods").doesNotContain("target");
  }

  @Test
  void replayRefusesAPostgresSourceWithOneLineAndThePasswordIsNeverPrinted() throws Exception {
    Path file = dir.resolve("sluice.yaml");
    Files.writeString(file, PG_VALID);
    StringWriter err = new StringWriter();
    int exit = Main.commandLine().setErr(new PrintWriter(err)).setOut(new PrintWriter(new StringWriter()))
        .execute("replay", "--config", file.toString(), "--table", "public.orders", "--from", "oldest", "--to", "x");
    assertThat(exit).as("stderr: %s", err).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString()).contains("replay is not available for a postgres source").doesNotContain("Exception");

    SluiceConfig config = ConfigLoader.load(file);
    assertThat(config.postgres().password()).isEqualTo("s3cret");
    assertThat(config.toString()).doesNotContain("s3cret").contains("password=****");
  }

  /**
   * A database the server says does not exist is a configuration error at once (exit 3, one line
   * with the SQLSTATE), not a wait for a server that answers (a refused password, SQLSTATE 28P01,
   * takes the same path; the embedded server trusts local connections, so it is not shown here).
   */
  @Test
  void aDatabaseTheServerSaysDoesNotExistIsAConfigurationErrorNotAnEndlessWait() throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    Path file = dir.resolve("sluice.yaml");
    Files.writeString(file, PG_VALID.replace("jdbc:postgresql://127.0.0.1:1/shop",
        pg.jdbcUrl("no_such_database_here")).replace("user: sluice", "user: " + EmbeddedPostgresServer.USER));
    String err = refusedStart(file);
    assertThat(err).contains("postgres.url", "no_such_database_here", "3D000").doesNotContain("s3cret");
  }

  /**
   * A publication that does not exist, or does not publish the entry's table, is something only an
   * operator can fix: the start ends at once with exit 3 and one line naming the entry and the SQL
   * to run, before any slot is created (it used to start, log the partition's failure with a stack
   * trace and run on with a failed partition).
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("publicationsThatCannotBeRead")
  void aPublicationThatCannotBeReadEndsTheStartWithTheFixNamed(String what, String setUp, String expected)
      throws Exception {
    EmbeddedPostgresServer pg = EmbeddedPostgresServer.shared();
    String db = pg.createDatabase("pub_" + Math.abs(what.hashCode()));
    String url = pg.jdbcUrl(db);
    Jdbc.execute(url, "DROP PUBLICATION IF EXISTS shop_pub", "DROP TABLE IF EXISTS orders", "DROP TABLE IF EXISTS other",
        "CREATE TABLE orders (id text PRIMARY KEY, n int)", "CREATE TABLE other (id text PRIMARY KEY)");
    if (!setUp.isEmpty()) {
      Jdbc.execute(url, setUp);
    }
    Path file = dir.resolve("sluice.yaml");
    Files.writeString(file, config(url, "pub-check", "oldest"));
    String err = refusedStart(file);
    assertThat(err).contains("listeners[0]", "public.orders", expected).doesNotContain("\tat ");
    try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SELECT count(*) FROM pg_replication_slots WHERE database = current_database()")) {
      rs.next();
      assertThat(rs.getInt(1)).as("no slot created").isZero();
    }
  }

  /** Runs {@code sluice run} on {@code file}, which must end within 60 s with exit 3 and one line: that line. */
  private static String refusedStart(Path file) {
    StringWriter err = new StringWriter();
    int exit = org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(Duration.ofSeconds(60), () ->
        Main.commandLine().setErr(new PrintWriter(err)).setOut(new PrintWriter(new StringWriter()))
            .execute("run", "--config", file.toString()));
    assertThat(exit).as("stderr: %s", err).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(err.toString().strip().lines()).hasSize(1);
    return err.toString();
  }

  static Stream<Arguments> publicationsThatCannotBeRead() {
    return Stream.of(
        Arguments.of("no such publication", "", "CREATE PUBLICATION shop_pub"),
        Arguments.of("the table not in the publication", "CREATE PUBLICATION shop_pub FOR TABLE other",
            "does not publish public.orders"));
  }

  /**
   * {@code dead-letters} works on a postgres configuration; a PostgreSQL that cannot be reached is
   * the documented exit code 4 with one line naming the server, and the password is not shown.
   */
  @Test
  void deadLettersOnAnUnreachablePostgresIsOneLineWithExitCode4() throws Exception {
    Path file = dir.resolve("sluice.yaml");
    Files.writeString(file, PG_VALID);
    StringWriter err = new StringWriter();
    int exit = Main.commandLine().setErr(new PrintWriter(err)).setOut(new PrintWriter(new StringWriter()))
        .execute("dead-letters", "list", "--config", file.toString(), "--table", "public.orders");
    assertThat(exit).as("stderr: %s", err).isEqualTo(Main.EXIT_UNREACHABLE);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString()).startsWith("sluice dead-letters: cannot reach a server: ").contains("127.0.0.1:1")
        .doesNotContain("s3cret").doesNotContain("\tat ");
  }

  /**
   * The PostgreSQL server stopped (fast shutdown: connections end, new ones are refused) under a
   * running {@code sluice run} and started again with its data: readiness is DOWN naming
   * PostgreSQL while it is away, the process stays up, and the rows written just before the stop
   * and after the restart all arrive. A server that is down when the service starts is waited for.
   */
  @Test
  void aPostgresStoppedUnderTheRunningServiceMakesItNotReadyAndNothingIsLostAfterItReturns() throws Exception {
    try (EmbeddedPostgresServer pg = EmbeddedPostgresServer.start()) {
      String db = pg.createDatabase("outage");
      String url = pg.jdbcUrl(db);
      Jdbc.execute(url, "CREATE TABLE orders (id text PRIMARY KEY, n int)", "CREATE PUBLICATION shop_pub FOR TABLE orders");
      kafka.createTopic("pg-outage", 1);
      Path file = dir.resolve("sluice.yaml");
      Files.writeString(file, config(url, "pg-outage", "oldest"));
      stop(pg);
      try (ChildJvm service = ChildJvm.start("service", Main.class, "run", "--config", file.toString(),
          "--status-every", "1")) {
        String base = service.awaitLineStartingWith("http endpoint: ", Duration.ofSeconds(60))
            .substring("http endpoint: ".length());
        service.awaitLineStartingWith("waiting for PostgreSQL: ", Duration.ofSeconds(60));
        assertThat(get(base, "/health/ready").statusCode()).isEqualTo(503);
        pg.restart();
        service.awaitLineStartingWith("running", Duration.ofSeconds(60));
        await().atMost(Duration.ofSeconds(60)).until(() -> get(base, "/health/ready").statusCode() == 200);
        insert(url, 0, 20);
        await().atMost(Duration.ofSeconds(60)).until(() -> keys("pg-outage", 20).size() == 20);
        insert(url, 20, 40); // mid-stream: the service may or may not have read these when the server stops

        stop(pg);
        await().atMost(Duration.ofSeconds(30)).until(() -> get(base, "/health/ready").statusCode() == 503);
        assertThat(get(base, "/health/ready").body()).contains("PostgreSQL does not answer");
        await().during(Duration.ofSeconds(10)).atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofSeconds(1))
            .until(() -> service.isAlive() && get(base, "/health/ready").statusCode() == 503);
        pg.restart();

        await().atMost(Duration.ofSeconds(90)).until(() -> get(base, "/health/ready").statusCode() == 200);
        insert(url, 40, 60);
        Set<String> expected = new HashSet<>();
        for (int i = 0; i < 60; i++) {
          expected.add("public.orders[\"o" + i + "\"]"); // qualified by its table (ADR 0093)
        }
        await().atMost(Duration.ofSeconds(90)).until(() -> keys("pg-outage", 60).containsAll(expected));
        assertThat(keys("pg-outage", 60)).isEqualTo(expected);
        assertThat(service.isAlive()).as("the outage did not end the process").isTrue();
      }
    }
  }

  private static void insert(String url, int from, int to) throws Exception {
    Jdbc.execute(url, "INSERT INTO orders SELECT 'o' || g, g FROM generate_series(" + from + ", " + (to - 1) + ") g");
  }

  /**
   * A fast shutdown of the server (SIGINT to the postmaster: sessions end, the data is kept);
   * {@link EmbeddedPostgresServer#restart} starts it again on the same directory and port.
   */
  private static void stop(EmbeddedPostgresServer pg) throws Exception {
    long pid = Long.parseLong(Files.readAllLines(pg.dataDirectory().resolve("postmaster.pid")).get(0).trim());
    Process kill = new ProcessBuilder("kill", "-INT", Long.toString(pid)).inheritIO().start();
    assertThat(kill.waitFor()).isZero();
    await().atMost(Duration.ofSeconds(60))
        .until(() -> ProcessHandle.of(pid).map(p -> !p.isAlive()).orElse(true));
  }
}
