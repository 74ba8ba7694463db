package dev.sluice.demo;

import dev.sluice.ConfigurationException;
import dev.sluice.app.cli.CommandPlugin;
import dev.sluice.demo.enrolment.EnrolmentDemo;
import dev.sluice.demo.relay.RelayDemo;
import dev.sluice.demo.views.ViewsDemo;
import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code sluice demo}: the scenarios on embedded servers. Joins the {@code sluice} command line as a
 * {@link CommandPlugin} (META-INF/services), so the service module needs no test kit (ADR 0115).
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
    description = "Scenarios on embedded servers, each ending with a verification table and exit code 0 "
        + "only if it holds. listener (default): three listener processes on an embedded MongoDB; the owner "
        + "is paused past its lease (SIGSTOP), another takes over, the paused one's late write is rejected "
        + "by the fence.")
public final class DemoCommand implements Callable<Integer>, CommandPlugin {

  @Option(names = "--scenario", defaultValue = "listener",
      description = "listener (default): leases, takeover and fencing; views: materialized views under "
          + "concurrent writes with a paused listener JVM; enrolment: seed 003's sequenced enrol/unenrol "
          + "messages, shuffled and duplicated, applied by concurrent AMQP consumers; relay: a collection "
          + "relayed to Kafka and AMQP by two relay processes, each killed with SIGKILL mid-stream and "
          + "replaced, consumers de-duplicating with the inbox")
  String scenario;

  @Option(names = "--writers", defaultValue = "3", description = "views: concurrent writers (default ${DEFAULT-VALUE})")
  int writers;

  @Option(names = "--customers", defaultValue = "20", description = "views: customers (default ${DEFAULT-VALUE})")
  int customers;

  @Option(names = "--messages", defaultValue = "2000",
      description = "enrolment: distinct messages (default ${DEFAULT-VALUE})")
  int messages;

  @Option(names = "--consumers", defaultValue = "5",
      description = "enrolment: concurrent consumers (default ${DEFAULT-VALUE})")
  int consumers;

  @Option(names = "--changes", defaultValue = "3000", description = "listener, views: changes to write (default ${DEFAULT-VALUE}; views: 1500)")
  int changes;

  @Option(names = "--rate", defaultValue = "500", description = "listener, views: changes per second (default ${DEFAULT-VALUE}; views: 250)")
  int rate;

  @Option(names = "--lease-ms", defaultValue = "3000", description = "listener, views: lease duration in ms (default ${DEFAULT-VALUE})")
  long leaseMillis;

  @Option(names = "--checkpoint-every", defaultValue = "50", description = "listener, views: changes per checkpoint (default ${DEFAULT-VALUE}; views: 20)")
  int checkpointEvery;

  @Option(names = "--keys", defaultValue = "100", description = "relay: documents written to (default ${DEFAULT-VALUE})")
  int keys;

  @Override
  public Integer call() throws Exception {
    switch (scenario) {
      case "listener":
        break;
      case "views":
        return views();
      case "enrolment":
        return enrolment();
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

  @picocli.CommandLine.Spec
  picocli.CommandLine.Model.CommandSpec spec;

  /** The option's value if given on the command line, else this scenario's own default. */
  private int given(String option, int value, int scenarioDefault) {
    return spec != null && spec.commandLine().getParseResult() != null
        && spec.commandLine().getParseResult().hasMatchedOption(option) ? value : scenarioDefault;
  }

  private int views() throws Exception {
    // A view change costs several round trips on the embedded server: fewer, slower writes than
    // the listener scenario keep the run near half a minute.
    ViewsDemo.Settings d = ViewsDemo.Settings.defaults();
    changes = given("--changes", changes, d.writes());
    rate = given("--rate", rate, d.ratePerSecond());
    checkpointEvery = given("--checkpoint-every", checkpointEvery, d.checkpointEvery());
    if (changes < 30 || rate < 1 || leaseMillis < 300 || checkpointEvery < 1 || writers < 1 || customers < 1) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
          "need --changes >= 30, --rate >= 1, --lease-ms >= 300, --checkpoint-every >= 1, --writers >= 1,"
              + " --customers >= 1");
    }
    ViewsDemo.Result result = new ViewsDemo(new ViewsDemo.Settings(changes, rate, writers, customers,
        Duration.ofMillis(leaseMillis), checkpointEvery), System.out).run();
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

  private int enrolment() throws Exception {
    if (messages < 10 || consumers < 1) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
          "need --messages >= 10, --consumers >= 1");
    }
    EnrolmentDemo.Result result = new EnrolmentDemo(EnrolmentDemo.Settings.defaults()
        .withMessages(messages).withConsumers(consumers), System.out).run();
    return result.ok() ? 0 : 1;
  }
}
