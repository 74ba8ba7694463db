package dev.sluice.app;

import dev.sluice.app.cli.Messages;
import com.mongodb.MongoSecurityException;
import com.mongodb.MongoSocketException;
import com.mongodb.MongoTimeoutException;
import dev.sluice.ConfigurationException;
import dev.sluice.app.cli.CommandPlugin;
import dev.sluice.app.cli.Secrets;
import dev.sluice.app.service.DeadLettersCommand;
import dev.sluice.app.service.ReplayCommand;
import dev.sluice.app.service.RunCommand;
import dev.sluice.app.service.SnapshotCommand;
import dev.sluice.app.service.SlotsCommand;
import dev.sluice.app.service.StatusCommand;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ConnectException;
import java.net.UnknownHostException;
import java.util.ServiceLoader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.ScopeType;

/**
 * The {@code sluice} command line. Errors are one line on standard error, passwords masked, the
 * stack trace only under {@code --verbose}; the exit code says what kind of error it was. Commands
 * of other modules on the class path join as {@link CommandPlugin}s ({@code demo}, from sluice-demo).
 */
@Command(
    name = "sluice",
    mixinStandardHelpOptions = true,
    version = "sluice 0.1.0-SNAPSHOT",
    description = "Reliable change-data processing: listeners with leases, fencing and checkpoints.",
    exitCodeListHeading = "%nExit codes:%n",
    exitCodeList = {
        "0:success",
        "1:failure while running (see the message; --verbose shows the stack trace)",
        "2:usage error (an unknown option, a missing or impossible argument)",
        "3:configuration error (the file or a setting names what is wrong); nothing was started",
        "4:a server could not be reached or refused the credentials at start"},
    subcommands = {StatusCommand.class, RunCommand.class, DeadLettersCommand.class,
        ReplayCommand.class, SnapshotCommand.class, SlotsCommand.class})
public final class Main implements Runnable {
  public static final int EXIT_FAILURE = 1;
  public static final int EXIT_USAGE = 2;
  public static final int EXIT_CONFIGURATION = 3;
  public static final int EXIT_UNREACHABLE = 4;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  @Option(names = "--verbose", scope = ScopeType.INHERIT, description = "print the stack trace of an error")
  boolean verbose;

  public static void main(String[] args) {
    System.exit(commandLine().execute(args));
  }

  /** The command line with Sluice's error handling: what {@link #main} runs, and what tests run. */
  public static CommandLine commandLine() {
    CommandLine cli = new CommandLine(new Main());
    // Before the handlers are set: picocli hands its settings to the subcommands present at the time.
    for (CommandPlugin plugin : ServiceLoader.load(CommandPlugin.class, Main.class.getClassLoader())) {
      cli.addSubcommand(plugin);
    }
    cli.setExecutionExceptionHandler((e, failed, parsed) -> {
      boolean verbose = parsed.matchedOption("--verbose") != null
          || parsed.subcommands().stream().anyMatch(s -> s.matchedOption("--verbose") != null);
      int code = exitCode(e);
      String kind = switch (code) {
        case EXIT_CONFIGURATION -> "configuration error";
        case EXIT_UNREACHABLE -> refusedCredentials(e) ? "a server refused the credentials" : "cannot reach a server";
        default -> "failed";
      };
      String message = e instanceof ConfigurationException ? e.getMessage() : Messages.oneLine(e);
      PrintWriter err = failed.getErr();
      err.println(Secrets.mask("sluice " + failed.getCommandName() + ": " + kind + ": " + message.replace('\n', ' ')
          + (code == EXIT_FAILURE && !verbose ? " (--verbose shows the stack trace)" : "")));
      if (verbose) {
        StringWriter trace = new StringWriter();
        e.printStackTrace(new PrintWriter(trace));
        err.print(Secrets.mask(trace.toString()));
      }
      err.flush();
      return code;
    });
    cli.setExitCodeExceptionMapper(Main::exitCode);
    return cli;
  }

  private static boolean refusedCredentials(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof MongoSecurityException || t instanceof com.rabbitmq.client.PossibleAuthenticationFailureException
          || sqlState(t).startsWith("28")) {
        return true;
      }
    }
    return false;
  }

  /** The SQLSTATE of a JDBC error, or "" for other errors. */
  private static String sqlState(Throwable t) {
    return t instanceof java.sql.SQLException sql && sql.getSQLState() != null ? sql.getSQLState() : "";
  }

  /** The exit code of an error: configuration, unreachable server, or a failure while running. */
  public static int exitCode(Throwable e) {
    if (e instanceof CommandLine.ParameterException) {
      return EXIT_USAGE;
    }
    if (e instanceof ConfigurationException) {
      return EXIT_CONFIGURATION;
    }
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof MongoTimeoutException || t instanceof MongoSocketException || t instanceof MongoSecurityException
          || t instanceof ConnectException || t instanceof UnknownHostException
          || t instanceof com.rabbitmq.client.PossibleAuthenticationFailureException
          // SQL: a connection that could not be made (08) or credentials refused (28)
          || sqlState(t).startsWith("08") || sqlState(t).startsWith("28")) {
        return EXIT_UNREACHABLE;
      }
    }
    return EXIT_FAILURE;
  }

  @Override
  public void run() {
    spec.commandLine().usage(System.out);
  }
}
