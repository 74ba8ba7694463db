package dev.sluice.testkit.net;

import dev.sluice.SluiceException;
import java.io.IOException;
import java.net.ServerSocket;

/** Local TCP ports for the embedded servers of the test kits. */
public final class Ports {
  private Ports() {}

  /**
   * A port nothing listened on a moment ago (the operating system's choice for port 0); another
   * process may still take it before the caller binds it.
   */
  public static int free() {
    try (ServerSocket s = new ServerSocket(0)) {
      s.setReuseAddress(true);
      return s.getLocalPort();
    } catch (IOException e) {
      throw new SluiceException("No free port: " + e, e);
    }
  }
}
