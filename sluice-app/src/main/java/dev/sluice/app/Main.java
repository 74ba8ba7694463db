package dev.sluice.app;

import dev.sluice.app.demo.DemoCommand;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code sluice} command line. */
@Command(
    name = "sluice",
    mixinStandardHelpOptions = true,
    version = "sluice 0.1.0-SNAPSHOT",
    description = "Reliable change-data processing: listeners with leases, fencing and checkpoints.",
    subcommands = {DemoCommand.class, StatusCommand.class, dev.sluice.app.service.RunCommand.class,
        dev.sluice.app.service.DeadLettersCommand.class, dev.sluice.app.service.ReplayCommand.class})
public final class Main implements Runnable {

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  public static void main(String[] args) {
    System.exit(new CommandLine(new Main()).execute(args));
  }

  @Override
  public void run() {
    spec.commandLine().usage(System.out);
  }
}
