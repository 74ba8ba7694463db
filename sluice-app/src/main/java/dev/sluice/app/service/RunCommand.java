package dev.sluice.app.service;

import dev.sluice.app.StatusCommand;
import dev.sluice.app.config.ConfigLoader;
import dev.sluice.app.config.SluiceConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code sluice run --config sluice.yaml}: relays every configured collection to its sink until stopped. */
@Command(name = "run", mixinStandardHelpOptions = true,
    description = "Run the listeners of a configuration file (relay collections to Kafka or AMQP) until stopped.")
public final class RunCommand implements Callable<Integer> {

  @Option(names = "--config", required = true, description = "YAML configuration file")
  Path configFile;

  @Option(names = "--status-every", defaultValue = "10", description = "seconds between status lines (default ${DEFAULT-VALUE})")
  int statusEvery;

  @Override
  public Integer call() throws Exception {
    SluiceConfig config = ConfigLoader.load(configFile);
    CountDownLatch stopped = new CountDownLatch(1);
    try (SluiceService service = SluiceService.start(config, new SimpleMeterRegistry())) {
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        service.close();
        stopped.countDown();
      }, "sluice-shutdown"));
      System.out.printf("running %d listener(s); stop with Ctrl-C or SIGTERM%n", service.listeners().size());
      while (!stopped.await(statusEvery, TimeUnit.SECONDS)) {
        System.out.print(StatusCommand.format(service.leases()));
      }
      return 0;
    }
  }
}
