package dev.sluice.demo.connect;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.Main;
import dev.sluice.testkit.process.ChildJvm;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@code sluice connect-demo} end to end, as {@code bin/sluice connect-demo} runs it: {@code
 * dev.sluice.app.Main} in its own JVM on this module's runtime class path (no test libraries), the
 * embedded broker and MongoDB, a Connect worker loading the connector from the packaged plugin
 * directory (which the reactor builds before this module; the default {@code --plugin-path}), the
 * plugin's example connector, and every written document arriving as a record on its collection's
 * topic; exit 0. Named {@code *IT}: the module's build runs it in the integration-test phase, so
 * that {@code mvn verify} has packaged the plugin directory first (see the module's pom).
 */
class ConnectDemoIT {

  @Test
  void everyWrittenDocumentArrivesOnItsTopicAndTheCommandExitsZero() throws Exception {
    Path classPathFile = Path.of("target", "classpath.txt");
    assertThat(classPathFile).as("written by the build before the tests").exists();
    String classPath = Path.of("target", "classes").toAbsolutePath() + File.pathSeparator
        + Files.readString(classPathFile).trim();
    List<String> out;
    try (ChildJvm cli = ChildJvm.startWithClassPath("sluice-connect-demo", List.of("-Xmx512m"), classPath,
        Main.class.getName(), "connect-demo", "--documents", "6", "--timeout-seconds", "30")) {
      int exit = cli.awaitExit(Duration.ofSeconds(90));
      out = cli.output();
      assertThat(exit).as(String.join("\n", out)).isZero();
    }
    String printed = String.join("\n", out);
    assertThat(printed).contains("Creating connector 'orders-mongodb' from the plugin's etc/sluice-mongodb-source.json")
        .contains("connector orders-mongodb and its 4 tasks are RUNNING")
        .contains("6 of 6 documents arrived as records")
        .contains("RESULT: OK");
    // Alternately to the example's two collections: o1, c2, o3, ... each on its collection's topic.
    for (int i = 1; i <= 6; i++) {
      String topic = i % 2 == 1 ? "sluice.shop.orders" : "sluice.shop.customers";
      String id = (i % 2 == 1 ? "o" : "c") + i;
      assertThat(printed).containsPattern("(?m)^  " + java.util.regex.Pattern.quote(topic)
          + " +partition \\d+ offset \\d+ +key=" + id + " +INSERT \\{\"_id\": \"" + id + "\", \"n\": " + i + "}$");
    }
  }

  @Test
  void withoutAPackagedPluginItSaysHowToBuildItAndExitsTwo() {
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    PrintStream original = System.err;
    int exit;
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      exit = Main.commandLine().execute("connect-demo", "--plugin-path", Path.of("target", "no-such-plugins").toString());
    } finally {
      System.setErr(original);
    }
    assertThat(exit).isEqualTo(2);
    assertThat(err.toString(StandardCharsets.UTF_8)).contains("--plugin-path")
        .contains("mvn -B -ntp -pl sluice-kafka-connect -am package -Dmaven.test.skip=true");
  }
}
