package dev.sluice.app.cli;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Issue 12 item 5: bad input as people give it, through the command line as they run it. Each
 * ends with one line on standard error (no stack trace) that names the setting and what was
 * expected, passwords masked, and the documented exit code: 2 usage, 3 configuration, 4 a server
 * that cannot be reached. Nothing starts: every case is refused before a listener runs.
 */
class BadInputTest {
  @TempDir static Path dir;

  private static final String VALID = """
      mongodb:
        uri: mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500
        database: shop
      http: { enabled: false }
      listeners:
        - collection: orders
          partitions: 2
          leaseDuration: 5s
          checkpoint: { every: 50, maxDelay: 500ms }
          onFailure: park
          retry: { attempts: 3, initialDelay: 100ms, maxDelay: 2s }
          sink:
            kafka: { bootstrapServers: "localhost:9092", topic: orders }
      """;

  /** A configuration case: the file's text, the exit code, what the one line must say. */
  private static Arguments file(String name, String yaml, int code, String... says) {
    return Arguments.of(name, yaml, null, code, says);
  }

  private static Arguments args(String name, List<String> args, int code, String... says) {
    return Arguments.of(name, null, args, code, says);
  }

  static Stream<Arguments> cases() {
    List<Arguments> c = new ArrayList<>();
    c.add(file("empty file", "  \n", 3, "the file is empty"));
    c.add(file("not YAML", "mongodb:\n  uri: \"unterminated\n  database: shop\n", 3, "not valid YAML", "sluice.yaml:"));
    c.add(file("a list where a section belongs", VALID.replace("mongodb:\n", "mongodb: [a, b]\nx:\n"), 3,
        "sluice.yaml:1:1: mongodb", "expected a section of keys"));
    c.add(file("a section where a number belongs", VALID.replace("partitions: 2", "partitions: { n: 2 }"), 3,
        "sluice.yaml:7:5: listeners[0].partitions", "expected a whole number"));
    c.add(file("tab indentation", "mongodb:\n\turi: x\n", 3, "not valid YAML"));
    c.add(file("misspelt top-level key", VALID.replace("mongodb:", "mongdb:"), 3, "unknown key 'mongdb'",
        "did you mean 'mongodb'?", "sluice.yaml:1:"));
    c.add(file("misspelt nested key", VALID.replace("- collection:", "- colection:"), 3, "unknown key 'colection'",
        "did you mean 'collection'?", "sluice.yaml:6:5: listeners[0].colection"));
    c.add(file("a key unlike any other", VALID.replace("onFailure: park", "frobnicate: yes"), 3,
        "unknown key 'frobnicate'", "Known keys here:"));
    c.add(file("no mongodb section", VALID.substring(VALID.indexOf("http:")), 3, "mongodb", "is required"));
    c.add(file("uri of another database, with a password", VALID.replace(
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500", "\"postgres://app:s3cret@db/shop\""), 3,
        "mongodb.uri", "must start with mongodb://", "app:****@"));
    c.add(file("no database", VALID.replace("  database: shop\n", ""), 3, "mongodb.database", "is required"));
    c.add(file("database name with a space", VALID.replace("database: shop", "database: my shop"), 3,
        "mongodb.database", "'my shop'"));
    c.add(file("no listeners", VALID.substring(0, VALID.indexOf("listeners:")) + "listeners: []\n", 3,
        "listeners", "at least one"));
    c.add(file("zero partitions", VALID.replace("partitions: 2", "partitions: 0"), 3, "listeners[0].partitions", "must be in [1, 4096], but was 0"));
    c.add(file("a fraction of a partition", VALID.replace("partitions: 2", "partitions: 1.9"), 3, "listeners[0].partitions"));
    c.add(file("partitions in words", VALID.replace("partitions: 2", "partitions: two"), 3, "listeners[0].partitions"));
    c.add(file("a key given twice", VALID.replace("partitions: 2", "partitions: 2\n    partitions: 3"), 3,
        "partitions"));
    c.add(file("a duration in parsecs", VALID.replace("leaseDuration: 5s", "leaseDuration: 5 parsecs"), 3,
        "listeners[0].leaseDuration", "'5 parsecs' is not a duration"));
    c.add(file("a huge duration", VALID.replace("leaseDuration: 5s", "leaseDuration: 999999999999999h"), 3,
        "listeners[0].leaseDuration", "too long a duration"));
    c.add(file("checkpoint every 0", VALID.replace("every: 50", "every: 0"), 3, "listeners[0].checkpoint"));
    c.add(file("unknown failure policy", VALID.replace("onFailure: park", "onFailure: explode"), 3,
        "listeners[0].onFailure", "'explode'"));
    c.add(file("unknown history policy", VALID.replace("onFailure: park", "onFailure: park\n    onHistoryLost: ignore"), 3,
        "listeners[0].onHistoryLost", "'ignore'"));
    c.add(file("unknown invalidate policy", VALID.replace("onFailure: park", "onFailure: park\n    onInvalidate: restart"), 3,
        "listeners[0].onInvalidate", "'restart'"));
    c.add(file("bootstrap at no time", VALID.replace("onFailure: park", "onFailure: park\n    bootstrap: yesterday"), 3,
        "listeners[0].bootstrap", "yesterday"));
    c.add(file("no sink", VALID.substring(0, VALID.indexOf("    sink:")), 3, "listeners[0].sink", "required"));
    c.add(file("two sinks", VALID + "      amqp: { uri: amqp://localhost, exchange: orders }\n", 3,
        "listeners[0].sink", "exactly one"));
    c.add(file("kafka without topic", VALID.replace(", topic: orders", ""), 3, "listeners[0].sink.kafka.topic", "is required"));
    c.add(file("publish without mode", VALID.replace("topic: orders }", "topic: orders }\n      publish: { field: lastEvent }"), 3,
        "listeners[0].sink.publish.mode", "is required"));
    c.add(file("unknown publish onMissing", VALID.replace("topic: orders }",
        "topic: orders }\n      publish: { mode: domain-events, field: lastEvent, onMissing: drop }"), 3,
        "listeners[0].sink.publish.onMissing", "'drop'"));
    c.add(file("http port out of range", VALID.replace("http: { enabled: false }", "http: { port: 70000 }"), 3,
        "http.port", "70000"));
    c.add(file("http address with a space", VALID.replace("http: { enabled: false }", "http: { address: \"my host\" }"), 3,
        "http.address", "'my host'"));
    c.add(file("an unset environment variable", VALID.replace("database: shop", "database: ${SLUICE_TEST_UNSET_DB}"), 3,
        "sluice.yaml:3:", "environment variable SLUICE_TEST_UNSET_DB is not set", "${SLUICE_TEST_UNSET_DB:-default}"));
    c.add(file("a malformed variable reference", VALID.replace("database: shop", "database: ${1DB}"), 3,
        "'${1DB}' is not a variable reference"));
    c.add(file("two entries on one collection and group", VALID + VALID.substring(VALID.indexOf("  - collection:")), 3,
        "listeners[0] and listeners[1]"));
    c.add(file("a group with a space", VALID.replace("onFailure: park", "onFailure: park\n    group: my group"), 3,
        "listeners[0].group"));
    c.add(file("unknown legacy-checkpoint policy", VALID.replace("onFailure: park", "onFailure: park\n    legacyCheckpoints: maybe"), 3,
        "listeners[0].legacyCheckpoints", "maybe"));
    c.add(args("a missing configuration file", List.of("run", "--config", "/no/such/sluice.yaml"), 3,
        "/no/such/sluice.yaml does not exist"));
    c.add(args("run without --config", List.of("run"), 2, "--config"));
    c.add(file("a '$' in a collection name", VALID.replace("- collection: orders", "- collection: \"or$ders\""), 3,
        "listeners[0].collection", "without '$'", "'or$ders'"));
    c.add(file("a '#' in a collection name", VALID.replace("- collection: orders", "- collection: \"or#ders\""), 3,
        "listeners[0].collection", "'or#ders'"));
    c.add(file("a space in a Kafka topic", VALID.replace("topic: orders", "topic: \"orders events\""), 3,
        "listeners[0].sink.kafka.topic", "must be a Kafka topic name", "'orders events'"));
    c.add(file("a Kafka topic with braces", VALID.replace("topic: orders", "topic: \"orders{A}\""), 3,
        "listeners[0].sink.kafka.topic", "must be a Kafka topic name"));
    c.add(file("Kafka servers without a port", VALID.replace("localhost:9092", "localhost"), 3,
        "listeners[0].sink.kafka.bootstrapServers", "must be host:port", "'localhost'"));
    c.add(file("a Kafka port out of range", VALID.replace("localhost:9092", "localhost:99999"), 3,
        "listeners[0].sink.kafka.bootstrapServers", "ports from 1 to 65535"));
    c.add(file("an AMQP URI of another scheme, with a password", VALID.replace(
        "kafka: { bootstrapServers: \"localhost:9092\", topic: orders }",
        "amqp: { uri: \"http://app:s3cret@broker/\", exchange: orders }"), 3,
        "listeners[0].sink.amqp.uri", "must be amqp://", "app:****@"));
    c.add(file("an empty lease collection", VALID.replace("database: shop", "database: shop\n  leaseCollection: \"\""), 3,
        "mongodb.leaseCollection", "must be a collection name"));
    c.add(file("a MongoDB port out of range, with a password", VALID.replace(
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=500", "\"mongodb://app:s3cret@db:99999/\""), 3,
        "mongodb.uri", "is not a valid MongoDB connection string", "app:****@"));
    c.add(file("a MongoDB option that does not exist", VALID.replace(
        "?serverSelectionTimeoutMS=500", "?serverSelectionTimeoutMS=soon"), 3,
        "mongodb.uri", "is not a valid MongoDB connection string"));
    c.add(file("a 2 MB scalar", VALID.replace("database: shop", "database: " + "x".repeat(2 * 1024 * 1024)), 3,
        "at most 1048576"));
    c.add(args("a status interval of 0", List.of("run", "--config", "x.yaml", "--status-every", "0"), 2,
        "--status-every must be at least 1 second"));
    c.add(args("an unknown command", List.of("frobnicate"), 2, "frobnicate"));
    c.add(args("status of an unreachable MongoDB, with a password", List.of("status", "--mongo",
        "mongodb://app:s3cret@127.0.0.1:1/?serverSelectionTimeoutMS=300", "--database", "shop"), 4,
        "cannot reach a server", "127.0.0.1:1"));
    // Issue 37 item 5: a port out of range in each kind of URL, a wrong value for a numeric or
    // named option: exit 2 for an option, 3 for the file, the option or setting named.
    c.add(file("an AMQP port out of range, with a password", VALID.replace(
        "kafka: { bootstrapServers: \"localhost:9092\", topic: orders }",
        "amqp: { uri: \"amqp://app:s3cret@broker:70000/\", exchange: orders }"), 3,
        "listeners[0].sink.amqp.uri", "app:****@broker:70000"));
    String postgres = """
        postgres:
          url: "jdbc:postgresql://db:70000/shop?password=s3cret"
          user: postgres
          publication: shop_pub
        http: { enabled: false }
        listeners:
          - table: public.orders
            sink:
              kafka: { bootstrapServers: "localhost:9092", topic: orders }
        """;
    c.add(file("a PostgreSQL port out of range", postgres, 3, "postgres.url", "port 70000 is out of range",
        "1 to 65535"));
    c.add(file("a PostgreSQL URL of another scheme", postgres.replace("jdbc:postgresql://db:70000/", "postgresql://db/"),
        3, "postgres.url", "must be a PostgreSQL JDBC URL"));
    c.add(args("status with a MongoDB port out of range, with a password", List.of("status", "--mongo",
        "mongodb://app:s3cret@127.0.0.1:70000/", "--database", "shop"), 2,
        "--mongo 'mongodb://app:****@127.0.0.1:70000/' is not a valid MongoDB connection string", "65535"));
    c.add(args("status with a connection string of another scheme", List.of("status", "--mongo",
        "http://127.0.0.1:27017/", "--database", "shop"), 2, "--mongo 'http://127.0.0.1:27017/'",
        "is not a valid MongoDB connection string"));
    c.add(args("status with a MongoDB option of the wrong type", List.of("status", "--mongo",
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=soon", "--database", "shop"), 2, "--mongo",
        "serverselectiontimeoutms", "'soon'"));
    c.add(args("status with a database name with a space", List.of("status", "--mongo",
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300", "--database", "my shop"), 2, "--database 'my shop'"));
    c.add(args("dead-letters with a limit of 0", List.of("dead-letters", "list", "--config", "x.yaml",
        "--collection", "orders", "--limit", "0"), 2, "--limit must be at least 1, but was 0"));
    c.add(args("a non-numeric status interval", List.of("run", "--config", "x.yaml", "--status-every", "often"), 2,
        "--status-every", "'often'"));
    c.add(args("replay until a word, not an instant", List.of("replay", "--config", "x.yaml", "--collection",
        "orders", "--to", "orders-replay", "--from", "oldest", "--until", "never"), 2, "--until",
        "ISO-8601 instant such as 2026-01-01T00:00:00Z, but was 'never'"));
    return c.stream();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("cases")
  void isOneClearLineWithTheDocumentedExitCode(String name, String yaml, List<String> args, int code, String[] says)
      throws Exception {
    List<String> argv = args;
    if (yaml != null) {
      Path config = dir.resolve("sluice.yaml");
      Files.writeString(config, yaml);
      argv = List.of("run", "--config", config.toString());
    }
    StringWriter err = new StringWriter();
    StringWriter out = new StringWriter();
    int exit = Main.commandLine().setErr(new PrintWriter(err)).setOut(new PrintWriter(out)).execute(argv.toArray(String[]::new));

    String text = err.toString();
    assertThat(exit).as("exit code; stderr: %s", text).isEqualTo(code);
    assertThat(text).as("stderr").doesNotContain("s3cret").doesNotContain("\tat ").doesNotContain("Exception in thread");
    if (code != 2) {
      // Usage errors add picocli's usage text after their one line; every other error is one line.
      assertThat(text.strip().lines()).as("stderr").hasSize(1);
    }
    assertThat(text.strip().lines().findFirst().orElse("")).as("the first line").contains(says);
  }

  /** An unknown log format would leave the service without logs: refused before anything starts. */
  @org.junit.jupiter.api.Test
  void anUnknownLogFormatIsAConfigurationError() throws Exception {
    Path config = dir.resolve("sluice-log.yaml");
    Files.writeString(config, VALID);
    StringWriter err = new StringWriter();
    System.setProperty("SLUICE_LOG_FORMAT", "yaml");
    int exit;
    try {
      exit = Main.commandLine().setErr(new PrintWriter(err)).execute("run", "--config", config.toString());
    } finally {
      System.clearProperty("SLUICE_LOG_FORMAT");
    }
    assertThat(exit).isEqualTo(Main.EXIT_CONFIGURATION);
    assertThat(err.toString().strip().lines()).hasSize(1);
    assertThat(err.toString()).contains("SLUICE_LOG_FORMAT", "must be text or json", "'yaml'");
  }
}
