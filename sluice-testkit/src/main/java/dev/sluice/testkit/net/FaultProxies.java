package dev.sluice.testkit.net;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Fault proxies that end with the test: each proxy opened through this extension is closed after
 * the test method that opened it (or, when opened in {@code @BeforeAll}, after the class).
 *
 * <pre>{@code
 * @RegisterExtension final FaultProxies proxies = new FaultProxies();
 * FaultProxy toStore = proxies.to("lease-store", "127.0.0.1", mongoPort);
 * }</pre>
 */
public final class FaultProxies
    implements BeforeEachCallback, AfterEachCallback, AfterAllCallback {
  private final List<FaultProxy> perTest = new ArrayList<>();
  private final List<FaultProxy> perClass = new ArrayList<>();
  private boolean inTest;

  /** A proxy to {@code host:port} on a free loopback port. */
  public synchronized FaultProxy to(String name, String host, int port) {
    FaultProxy proxy = FaultProxy.to(name, host, port);
    (inTest ? perTest : perClass).add(proxy);
    return proxy;
  }

  /** Ends every fault of every open proxy at once. */
  public synchronized void passAll() {
    perTest.forEach(FaultProxy::pass);
    perClass.forEach(FaultProxy::pass);
  }

  @Override
  public synchronized void beforeEach(ExtensionContext context) {
    inTest = true;
    // A proxy shared by the class starts each test passing.
    perClass.forEach(FaultProxy::pass);
  }

  @Override
  public synchronized void afterEach(ExtensionContext context) {
    inTest = false;
    perTest.forEach(FaultProxy::close);
    perTest.clear();
  }

  @Override
  public synchronized void afterAll(ExtensionContext context) {
    perClass.forEach(FaultProxy::close);
    perClass.clear();
  }
}
