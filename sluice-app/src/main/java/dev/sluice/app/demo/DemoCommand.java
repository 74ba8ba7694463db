package dev.sluice.app.demo;

import dev.sluice.ConfigurationException;
import dev.sluice.app.demo.relay.RelayDemo;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code sluice demo}: the listener demo on an embedded MongoDB. */
@Command(name = "demo", mixinStandardHelpOptions = true,
    description = "Three listener processes on an embedded MongoDB; the owner is paused past its lease "
        + "(SIGSTOP), another takes over, the paused one's late write is rejected by the fence. "
        + "Ends with a verification table.")
public final class DemoCommand implements Callable<Integer> {

  @Option(names = "--scenario", defaultValue = "listener",
      description = "listener (default): leases, takeover and fencing; views: an order view and customer "
          + "stats maintained by two processes, the owner paused (SIGSTOP), compared with the recomputed join; "
          + "enrolment: seed 003, shuffled and duplicated messages through AMQP applied by five consumers "
          + "with sequence numbers, compared with sequential application; relay: a collection relayed to "
          + "Kafka and AMQP by two relay processes, each killed with SIGKILL mid-stream and replaced, "
          + "consumers de-duplicating with the inbox")
  String scenario;

  @Option(names = "--changes", defaultValue = "3000", description = "changes to write (default ${DEFAULT-VALUE})")
  int changes;

  @Option(names = "--rate", defaultValue = "500", description = "changes per second (default ${DEFAULT-VALUE})")
  int rate;

  @Option(names = "--lease-ms", defaultValue = "3000", description = "lease duration in ms (default ${DEFAULT-VALUE})")
  long leaseMillis;

  @Option(names = "--checkpoint-every", defaultValue = "50", description = "changes per checkpoint (default ${DEFAULT-VALUE})")
  int checkpointEvery;

  @Option(names = "--keys", defaultValue = "100", description = "relay scenario: documents written to (default ${DEFAULT-VALUE})")
  int keys;

  @Override
  public Integer call() throws Exception {
    switch (scenario) {
      case "listener":
        break;
      case "views":
        requireCommonOptions();
        return new dev.sluice.app.demo.views.ViewsDemo(new dev.sluice.app.demo.views.ViewsDemo.Settings(
            changes, rate, Duration.ofMillis(leaseMillis), 20), System.out).run().ok() ? 0 : 1;
      case "enrolment":
        requireCommonOptions();
        return new dev.sluice.app.demo.views.EnrolmentDemo(
            new dev.sluice.app.demo.views.EnrolmentDemo.Settings(changes, 50, 20), System.out).run().ok() ? 0 : 1;
      case "relay":
        return relay();
      default:
        throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
            "unknown --scenario '" + scenario + "'; known: listener, views, enrolment, relay");
    }
    if (changes < 30 || rate < 1 || leaseMillis < 300 || checkpointEvery < 1) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
          "need --changes >= 30, --rate >= 1, --lease-ms >= 300, --checkpoint-every >= 1");
    }
    Demo.Result result = new Demo(new Demo.Settings(changes, rate, Duration.ofMillis(leaseMillis),
        checkpointEvery, 40), System.out).run();
    return result.ok() ? 0 : 1;
  }

  private int relay() throws Exception {
    RelayDemo.Settings settings;
    try {
      settings = new RelayDemo.Settings(changes, keys, rate, checkpointEvery, Duration.ofMillis(leaseMillis));
    } catch (ConfigurationException e) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this), e.getMessage());
    }
    return new RelayDemo(settings, System.out).run().ok() ? 0 : 1;
  }

  private void requireCommonOptions() {
    if (changes < 30 || rate < 1 || leaseMillis < 300) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
          "need --changes >= 30, --rate >= 1, --lease-ms >= 300");
    }
  }
}
