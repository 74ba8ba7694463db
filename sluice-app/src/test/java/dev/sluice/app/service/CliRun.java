package dev.sluice.app.service;

import dev.sluice.app.Main;
import java.io.PrintWriter;
import java.io.StringWriter;

/** One run of the command line in this JVM: its exit code and what it printed. */
record CliRun(int exit, String out, String err) {

  static CliRun sluice(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int exit = Main.commandLine().setOut(new PrintWriter(out)).setErr(new PrintWriter(err)).execute(args);
    return new CliRun(exit, out.toString(), err.toString());
  }
}
