package dev.sluice.app.service;

import dev.sluice.app.cli.Messages;
import dev.sluice.app.service.config.ConfigLoader;
import dev.sluice.app.service.config.SluiceConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * {@code sluice run --config sluice.yaml}: relays every configured collection (or PostgreSQL table)
 * to its sink until stopped.
 */
@Command(name = "run", mixinStandardHelpOptions = true,
    description = "Run the listeners of a configuration file (relay MongoDB collections or PostgreSQL tables to"
        + " Kafka or AMQP) until stopped.")
public final class RunCommand implements Callable<Integer> {

  @Option(names = "--config", required = true, description = "YAML configuration file")
  Path configFile;

  @Option(names = "--status-every", defaultValue = "10", description = "seconds between status lines, at least 1 (default ${DEFAULT-VALUE})")
  int statusEvery;

  @Spec
  CommandSpec spec;

  /**
   * The log format is chosen in logback.xml by name; an unknown one would leave the service
   * without any log output, so it is a configuration error.
   */
  static void checkLogFormat() {
    String format = System.getProperty("SLUICE_LOG_FORMAT", System.getenv("SLUICE_LOG_FORMAT"));
    if (format != null && !format.equals("text") && !format.equals("json")) {
      throw new dev.sluice.app.service.config.ConfigException("SLUICE_LOG_FORMAT",
          "must be text or json, but was '" + format + "'");
    }
  }

  @Override
  public Integer call() throws Exception {
    if (statusEvery < 1) {
      throw new ParameterException(spec.commandLine(), "--status-every must be at least 1 second, but was " + statusEvery);
    }
    checkLogFormat();
    SluiceConfig config = ConfigLoader.load(configFile);
    CountDownLatch stopped = new CountDownLatch(1);
    try (SluiceService service = SluiceService.start(config, new SimpleMeterRegistry())) {
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        service.close();
        stopped.countDown();
      }, "sluice-shutdown"));
      System.out.printf("running %d listener(s); stop with Ctrl-C or SIGTERM%n", service.listeners().size());
      while (!stopped.await(statusEvery, TimeUnit.SECONDS)) {
        try {
          System.out.print(StatusCommand.format(service.leases()));
        } catch (RuntimeException e) {
          // The lease store is down or slow: the listeners weather it on their own (they retry
          // and take their partitions back when it returns); the status line must not end them.
          System.out.println("status unavailable, still running: " + Messages.oneLine(e));
        }
      }
      return 0;
    }
  }
}
