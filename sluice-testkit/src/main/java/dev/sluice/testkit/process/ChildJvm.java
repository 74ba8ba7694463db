package dev.sluice.testkit.process;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A separate JVM running a main class on this JVM's class path, for tests that need a real crash
 * (SIGKILL) or a real pause (SIGSTOP) of a process. Its standard output is collected line by line
 * so tests can wait for a line (a latch across processes) instead of sleeping.
 */
public final class ChildJvm implements AutoCloseable {
  private final String name;
  private final Process process;
  private final List<String> lines = new CopyOnWriteArrayList<>();
  private final Object lineArrived = new Object();
  private final Thread pump;

  private ChildJvm(String name, Process process) {
    this.name = name;
    this.process = process;
    this.pump = new Thread(this::pumpOutput, "child-jvm-" + name);
    this.pump.setDaemon(true);
    this.pump.start();
  }

  /**
   * Starts {@code mainClass} with {@code args} in a new JVM with this JVM's class path: a small
   * heap, the serial collector and C1 only, as suits a test's process that lives for seconds to
   * minutes beside other tests (the optimizing compiler's CPU would be most of what it saves).
   * Measurements pass their own options.
   */
  public static ChildJvm start(String name, Class<?> mainClass, String... args) {
    return start(name, DEFAULT_OPTIONS, mainClass, args);
  }

  /** The options of {@link #start(String, Class, String...)}, to add system properties to. */
  public static final List<String> DEFAULT_OPTIONS =
      List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1");

  /** Starts with extra JVM options (system properties, heap). */
  public static ChildJvm start(String name, List<String> jvmOptions, Class<?> mainClass, String... args) {
    return startWithClassPath(name, jvmOptions, System.getProperty("java.class.path"), mainClass.getName(), args);
  }

  /**
   * Starts {@code mainClass} on an explicit class path, for example an application's runtime class
   * path without the test libraries, to prove it runs as shipped.
   */
  public static ChildJvm startWithClassPath(
      String name, List<String> jvmOptions, String classPath, String mainClass, String... args) {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(jvmOptions);
    command.add("-cp");
    command.add(classPath);
    command.add(mainClass);
    command.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      return new ChildJvm(name, p);
    } catch (IOException e) {
      throw new IllegalStateException("Cannot start child JVM " + name + ": " + command, e);
    }
  }

  private void pumpOutput() {
    try (BufferedReader r =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = r.readLine()) != null) {
        lines.add(line);
        synchronized (lineArrived) {
          lineArrived.notifyAll();
        }
      }
    } catch (IOException e) {
      lines.add("[child-jvm " + name + " output closed: " + e + "]");
    } finally {
      synchronized (lineArrived) {
        lineArrived.notifyAll();
      }
    }
  }

  public long pid() {
    return process.pid();
  }

  public String name() {
    return name;
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  /** Every line the child printed so far. */
  public List<String> output() {
    return List.copyOf(lines);
  }

  /**
   * Waits until the child printed a line matching {@code matcher} and returns it. Fails with the
   * child's output if it exits or the timeout passes first.
   */
  public String awaitLine(Predicate<String> matcher, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    int seen = 0;
    synchronized (lineArrived) {
      while (true) {
        List<String> snapshot = output();
        for (int i = seen; i < snapshot.size(); i++) {
          if (matcher.test(snapshot.get(i))) {
            return snapshot.get(i);
          }
        }
        seen = snapshot.size();
        long left = deadline - System.nanoTime();
        if (left <= 0 || (!process.isAlive() && !pump.isAlive())) {
          throw new AssertionError(
              "Child JVM " + name + (process.isAlive() ? " did not print the expected line within "
                  + timeout : " exited (" + exitCodeOrNull() + ") without printing the expected line")
                  + "; output:\n" + String.join("\n", output()));
        }
        try {
          lineArrived.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new AssertionError("interrupted", e);
        }
      }
    }
  }

  /** Waits for a line starting with {@code prefix}. */
  public String awaitLineStartingWith(String prefix, Duration timeout) {
    return awaitLine(l -> l.startsWith(prefix), timeout);
  }

  private Integer exitCodeOrNull() {
    return process.isAlive() ? null : process.exitValue();
  }

  /**
   * Writes a line to the child's standard input: a latch the child can wait on (for example to
   * hold a handler call at a known point while the test pauses the process).
   */
  public void send(String line) {
    try {
      var in = process.getOutputStream();
      in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
      in.flush();
    } catch (IOException e) {
      throw new IllegalStateException("Cannot write to child JVM " + name, e);
    }
  }

  /** SIGKILL: the process dies at once, without running shutdown hooks or finally blocks. */
  public void kill() {
    process.destroyForcibly();
    try {
      if (!process.waitFor(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("Child JVM " + name + " survived SIGKILL");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** SIGTERM: the stop an operator or an orchestrator sends; the child's shutdown hooks run. */
  public void terminate() {
    signal("TERM");
  }

  /** SIGSTOP: freezes every thread of the process, as a long GC pause or a VM migration would. */
  public void pause() {
    signal("STOP");
  }

  /** SIGCONT: resumes a paused process. */
  public void resume() {
    signal("CONT");
  }

  private void signal(String sig) {
    try {
      Process kill = new ProcessBuilder("kill", "-" + sig, Long.toString(process.pid())).start();
      if (!kill.waitFor(10, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        throw new IllegalStateException("kill -" + sig + " " + process.pid() + " failed");
      }
    } catch (IOException e) {
      throw new IllegalStateException("Cannot send SIG" + sig + " to " + name, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Waits for the child to exit by itself and returns its exit code. */
  public int awaitExit(Duration timeout) {
    try {
      if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        // A child that hangs says where: SIGQUIT makes the JVM print its threads to its output,
        // which is collected; the child keeps running, so give the dump a moment to arrive.
        try {
          signal("QUIT");
          process.waitFor(2, TimeUnit.SECONDS);
        } catch (RuntimeException noDump) {
          // the assertion below still names the child and its output so far
        }
        throw new AssertionError("Child JVM " + name + " did not exit within " + timeout
            + "; output, ending with its threads:\n" + String.join("\n", output()));
      }
      pump.join(TimeUnit.SECONDS.toMillis(5));
      return process.exitValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** Writes the child's output to a file, for post-mortem reading of a failed test. */
  public void dumpOutput(Path file) throws IOException {
    Files.write(file, output(), StandardCharsets.UTF_8);
  }

  /** Kills the child if it still runs (resuming it first if it was paused). */
  @Override
  public void close() {
    if (process.isAlive()) {
      try {
        signal("CONT");
      } catch (RuntimeException ignored) {
        // the process may have exited between the check and the signal
      }
      kill();
    }
  }
}
