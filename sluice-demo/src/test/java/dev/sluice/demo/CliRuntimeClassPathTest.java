package dev.sluice.demo;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.Main;
import dev.sluice.testkit.process.ChildJvm;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Runs the CLI as {@code bin/sluice} does: in its own JVM, {@code dev.sluice.app.Main} on this
 * module's runtime class path only (no test libraries), where {@code demo} must join the command
 * line through its service registration (ADR 0115). The relay scenario touches every embedded
 * server, both sinks and the inbox, so a runtime dependency that is only present in tests fails here
 * instead of in a user's first demo.
 */
class CliRuntimeClassPathTest {
  @Test
  void theRelayDemoRunsOnTheRuntimeClassPath() throws Exception {
    Path classPathFile = Path.of("target", "classpath.txt");
    assertThat(classPathFile).as("written by the build before the tests").exists();
    String classPath = Path.of("target", "classes").toAbsolutePath() + File.pathSeparator
        + Files.readString(classPathFile).trim();
    assertThat(classPath).doesNotContain("awaitility").doesNotContain("assertj");

    try (ChildJvm cli = ChildJvm.startWithClassPath("sluice-cli", List.of("-Xmx512m", "-XX:TieredStopAtLevel=1"), classPath,
        Main.class.getName(), "demo", "--scenario", "relay", "--changes", "300", "--keys", "20",
        "--checkpoint-every", "20", "--lease-ms", "1000")) {
      int exit = cli.awaitExit(Duration.ofMinutes(3));
      assertThat(exit).as(String.join("\n", cli.output())).isZero();
      assertThat(cli.output()).contains("RESULT: OK");
    }
  }
}
