package dev.sluice.kafka.connect;

import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;
import org.slf4j.LoggerFactory;

/**
 * Closes the module's {@link SharedServers} when the test run ends, while the JVM still runs
 * (registered in {@code META-INF/services}): surefire's fork then exits with status 0 however its
 * shutdown hooks interleave.
 */
public final class SharedServersCloser implements LauncherSessionListener {
  @Override
  public void launcherSessionClosed(LauncherSession session) {
    LoggerFactory.getLogger(SharedServersCloser.class).info("Closing the shared test servers");
    SharedServers.close();
  }
}
