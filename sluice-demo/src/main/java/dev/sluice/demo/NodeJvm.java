package dev.sluice.demo;

import dev.sluice.testkit.process.ChildJvm;
import java.util.List;

/**
 * How the demos start their listener and relay processes: a JVM of their own on this class path
 * with a small heap, the serial collector and the client compiler only (C1). A demo's processes
 * live for seconds to a minute and run a little of everything once; the optimizing compiler would
 * spend more CPU compiling than it saves, on a machine the demo shares with its embedded servers.
 */
public final class NodeJvm {
  /** The JVM options of every demo process. */
  public static final List<String> OPTIONS = List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1");

  private NodeJvm() {}

  /** Starts {@code mainClass} with {@code args} as demo process {@code name}. */
  public static ChildJvm start(String name, Class<?> mainClass, String... args) {
    return ChildJvm.start(name, OPTIONS, mainClass, args);
  }
}
