package dev.sluice.app.demo.views;

import java.time.Duration;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code sluice demo-views}: materialized views under concurrent writes and a paused listener. */
@Command(name = "demo-views", mixinStandardHelpOptions = true,
    description = "Two processes maintain an order view and a customer stats view on an embedded MongoDB "
        + "while orders and customers change; the owner is paused (SIGSTOP), another takes over. "
        + "Ends by comparing the views with the join recomputed from scratch.")
public final class ViewsDemoCommand implements Callable<Integer> {

  @Option(names = "--writes", defaultValue = "2000", description = "source writes (default ${DEFAULT-VALUE})")
  int writes;

  @Option(names = "--rate", defaultValue = "200", description = "writes per second (default ${DEFAULT-VALUE})")
  int rate;

  @Option(names = "--lease-ms", defaultValue = "2000", description = "lease duration in ms (default ${DEFAULT-VALUE})")
  long leaseMillis;

  @Option(names = "--customers", defaultValue = "20", description = "customers (default ${DEFAULT-VALUE})")
  int customers;

  @Override
  public Integer call() throws Exception {
    if (writes < 30 || rate < 1 || leaseMillis < 300 || customers < 1) {
      throw new picocli.CommandLine.ParameterException(new picocli.CommandLine(this),
          "need --writes >= 30, --rate >= 1, --lease-ms >= 300, --customers >= 1");
    }
    return new ViewsDemo(new ViewsDemo.Settings(writes, rate, Duration.ofMillis(leaseMillis), customers),
        System.out).run().ok() ? 0 : 1;
  }
}
