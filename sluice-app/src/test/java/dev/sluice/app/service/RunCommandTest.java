package dev.sluice.app.service;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.app.Main;
import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** Options of {@code sluice run} that can never work are refused before anything starts. */
class RunCommandTest {

  @Test
  void aStatusIntervalBelowOneSecondIsAUsageErrorNamingTheOption() {
    // Before: --status-every 0 printed the status table about 95,000 times in 6 s.
    StringWriter err = new StringWriter();
    CommandLine cli = Main.commandLine().setErr(new PrintWriter(err));
    int code = cli.execute("run", "--config", "does-not-matter.yaml", "--status-every", "0");
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains("--status-every must be at least 1 second, but was 0");
  }
}
