package dev.sluice.testkit.net;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.sluice.testkit.net.FaultProxy.Direction;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Each fault of the proxy, against an echo server on loopback. */
class FaultProxyTest {
  @RegisterExtension final FaultProxies proxies = new FaultProxies();

  private ServerSocket echo;
  private final AtomicLong received = new AtomicLong();

  @BeforeEach
  void startEcho() throws IOException {
    echo = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread t = new Thread(() -> {
      while (!echo.isClosed()) {
        try {
          Socket s = echo.accept();
          Thread h = new Thread(() -> echoOn(s));
          h.setDaemon(true);
          h.start();
        } catch (IOException e) {
          return;
        }
      }
    });
    t.setDaemon(true);
    t.start();
  }

  private void echoOn(Socket s) {
    try (s) {
      InputStream in = s.getInputStream();
      OutputStream out = s.getOutputStream();
      byte[] b = new byte[8192];
      int n;
      while ((n = in.read(b)) >= 0) {
        received.addAndGet(n);
        out.write(b, 0, n);
        out.flush();
      }
    } catch (IOException e) {
      // client went away
    }
  }

  @AfterEach
  void stopEcho() throws IOException {
    echo.close();
  }

  private FaultProxy proxy() {
    return proxies.to("echo", "127.0.0.1", echo.getLocalPort());
  }

  private static Socket connect(FaultProxy proxy, int readTimeoutMillis) throws IOException {
    Socket s = new Socket();
    s.connect(new InetSocketAddress(proxy.host(), proxy.port()), 2_000);
    s.setSoTimeout(readTimeoutMillis);
    return s;
  }

  private static byte[] roundTrip(Socket s, byte[] data) throws IOException {
    s.getOutputStream().write(data);
    s.getOutputStream().flush();
    return s.getInputStream().readNBytes(data.length);
  }

  @Test
  void passesBytesBothWaysAndCountsThem() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket s = connect(proxy, 5_000)) {
      assertThat(roundTrip(s, "hello".getBytes())).isEqualTo("hello".getBytes());
    }
    assertThat(proxy.connectionsAccepted()).isEqualTo(1);
    assertThat(proxy.bytesForwarded(Direction.UPSTREAM)).isEqualTo(5);
    assertThat(proxy.bytesForwarded(Direction.DOWNSTREAM)).isEqualTo(5);
  }

  @Test
  void latencyDelaysEachWayAndKeepsOrder() throws IOException {
    FaultProxy proxy = proxy().latency(Duration.ofMillis(100), Duration.ofMillis(50),
        Duration.ofMinutes(1));
    try (Socket s = connect(proxy, 5_000)) {
      long start = System.nanoTime();
      byte[] data = new byte[64 * 1024];
      for (int i = 0; i < data.length; i++) {
        data[i] = (byte) i;
      }
      assertThat(roundTrip(s, data)).isEqualTo(data);
      // Up and down each wait at least the fixed part.
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(
          Duration.ofMillis(200));
    }
  }

  @Test
  void throttleLimitsBandwidth() throws IOException {
    FaultProxy proxy = proxy().throttle(100_000, Duration.ofMinutes(1));
    try (Socket s = connect(proxy, 10_000)) {
      long start = System.nanoTime();
      byte[] data = new byte[50_000];
      assertThat(roundTrip(s, data)).hasSize(50_000);
      // 50 kB up and 50 kB down at 100 kB/s each way: at least 0.5 s one way.
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(
          Duration.ofMillis(450));
    }
  }

  @Test
  void dropNewConnectionsClosesThemButKeepsOpenOnes() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket open = connect(proxy, 5_000)) {
      roundTrip(open, "a".getBytes());
      proxy.dropNewConnections(Duration.ofMinutes(1));
      try (Socket dropped = connect(proxy, 5_000)) {
        assertThat(readOrFailure(dropped)).isIn("eof", "reset");
      }
      assertThat(roundTrip(open, "b".getBytes())).isEqualTo("b".getBytes());
    }
    assertThat(proxy.connectionsRefused()).isEqualTo(1);
  }

  @Test
  void blackholeHoldsBytesUntilItEndsThenDeliversThem() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket s = connect(proxy, 300)) {
      roundTrip(s, "a".getBytes());
      proxy.blackhole(Duration.ofMinutes(1));
      s.getOutputStream().write("held".getBytes());
      assertThatThrownBy(() -> s.getInputStream().read()).isInstanceOf(
          SocketTimeoutException.class);
      assertThat(received.get()).isEqualTo(1);
      // A new connection is accepted and never answered.
      try (Socket silent = connect(proxy, 300)) {
        silent.getOutputStream().write("x".getBytes());
        assertThatThrownBy(() -> silent.getInputStream().read()).isInstanceOf(
            SocketTimeoutException.class);
      }
      proxy.pass();
      s.setSoTimeout(5_000);
      assertThat(s.getInputStream().readNBytes(4)).isEqualTo("held".getBytes());
    }
  }

  @Test
  void everyFaultEndsByItselfAfterItsBound() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket s = connect(proxy, 10_000)) {
      roundTrip(s, "a".getBytes());
      proxy.blackhole(Duration.ofMillis(300));
      long start = System.nanoTime();
      assertThat(roundTrip(s, "b".getBytes())).isEqualTo("b".getBytes());
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(
          Duration.ofMillis(250));
    }
    assertThatThrownBy(() -> proxy.blackhole(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bound");
  }

  @Test
  void oneWayLetsRequestsReachTheServerButNoAnswerBack() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket s = connect(proxy, 300)) {
      roundTrip(s, "a".getBytes());
      proxy.oneWay(Direction.UPSTREAM, Duration.ofMinutes(1));
      s.getOutputStream().write("req".getBytes());
      await().atMost(Duration.ofSeconds(5)).until(() -> received.get() == 4);
      assertThatThrownBy(() -> s.getInputStream().read()).isInstanceOf(
          SocketTimeoutException.class);
      proxy.pass();
      s.setSoTimeout(5_000);
      assertThat(s.getInputStream().readNBytes(3)).isEqualTo("req".getBytes());
    }
  }

  @Test
  void cutClosesOpenConnectionsAndRefusesNewOnes() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket s = connect(proxy, 5_000)) {
      roundTrip(s, "a".getBytes());
      proxy.cut(Duration.ofMinutes(1));
      assertThat(readOrFailure(s)).isIn("eof", "reset");
      try (Socket refused = connect(proxy, 5_000)) {
        assertThat(readOrFailure(refused)).isIn("eof", "reset");
      }
    }
    proxy.pass();
    try (Socket s = connect(proxy, 5_000)) {
      assertThat(roundTrip(s, "c".getBytes())).isEqualTo("c".getBytes());
    }
  }

  @Test
  void resetConnectionsResetsOpenOnesOnly() throws IOException {
    FaultProxy proxy = proxy();
    try (Socket s = connect(proxy, 5_000)) {
      roundTrip(s, "a".getBytes());
      proxy.resetConnections();
      assertThat(readOrFailure(s)).isEqualTo("reset");
      await().atMost(Duration.ofSeconds(5)).until(() -> proxy.openConnections() == 0);
    }
    try (Socket s = connect(proxy, 5_000)) {
      assertThat(roundTrip(s, "b".getBytes())).isEqualTo("b".getBytes());
    }
  }

  @Test
  void refusesAnythingButLoopbackAndClosesItselfAfterItsLifetime() throws IOException {
    assertThatThrownBy(() -> FaultProxy.to("far", "192.0.2.1", 27017))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("loopback");
    try (FaultProxy shortLived = FaultProxy.to("short", "127.0.0.1", echo.getLocalPort(), 0,
        Duration.ofMillis(300))) {
      int port = shortLived.port();
      await().atMost(Duration.ofSeconds(5)).untilAsserted(() -> assertThatThrownBy(() -> {
        try (Socket s = new Socket()) {
          s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1_000);
        }
      }).isInstanceOf(IOException.class));
      assertThatThrownBy(() -> shortLived.blackhole(Duration.ofSeconds(1)))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }
  }

  private static String readOrFailure(Socket s) {
    try {
      return s.getInputStream().read() < 0 ? "eof" : "data";
    } catch (SocketTimeoutException e) {
      return "timeout";
    } catch (SocketException e) {
      return "reset";
    } catch (IOException e) {
      return "error " + e;
    }
  }
}
