package dev.sluice.app.cli;

import static org.assertj.core.api.Assertions.assertThat;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.LoggerContext;
import ch.qos.logback.classic.joran.JoranConfigurator;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.parallel.ResourceLock;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 12 items 5 and 6: the service's own logging configuration, in both formats, prints a
 * lifecycle line's key-value pairs and masks a connection-string password in the message and in
 * the pairs.
 */
@ResourceLock("System.err")
class LogFormatsMaskPasswordsTest {

  @ParameterizedTest
  @ValueSource(strings = {"text", "json"})
  void theServicesLogLinesCarryTheKeyValuePairsAndNoPassword(String format) throws Exception {
    PrintStream err = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    LoggerContext context = new LoggerContext();
    context.setMDCAdapter(new ch.qos.logback.classic.util.LogbackMDCAdapter());
    System.setErr(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      context.putProperty("SLUICE_LOG_FORMAT", format);
      JoranConfigurator configurator = new JoranConfigurator();
      configurator.setContext(context);
      configurator.doConfigure(getClass().getResource("/logback.xml"));
      Logger lifecycle = context.getLogger("dev.sluice.lifecycle");
      lifecycle.atWarn().addKeyValue("stream", "shop.orders").addKeyValue("partition", "0/2")
          .addKeyValue("reason", "cannot reach mongodb://app:s3cret@db1:27017/shop")
          .log("lost after mongodb://ops:hunter2@db2/");
    } finally {
      context.stop();
      System.setErr(err);
    }
    String out = captured.toString(StandardCharsets.UTF_8);
    assertThat(out).doesNotContain("s3cret").doesNotContain("hunter2");
    if (format.equals("json")) {
      assertThat(out).contains("\"message\":\"lost after mongodb://ops:****@db2/\"", "\"stream\":\"shop.orders\"",
          "\"partition\":\"0/2\"", "\"reason\":\"cannot reach mongodb://app:****@db1:27017/shop\"");
    } else {
      assertThat(out).contains("lifecycle - lost after mongodb://ops:****@db2/ stream=\"shop.orders\" partition=\"0/2\""
          + " reason=\"cannot reach mongodb://app:****@db1:27017/shop\"");
    }
  }
}
