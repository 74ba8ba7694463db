package dev.sluice.testkit.net;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TCP proxy between one client and one server on this machine, whose network a test can break:
 * latency (fixed and jittered), bandwidth, new connections dropped, a blackhole (connections stay
 * open and nothing arrives), a cut (connections closed and new ones refused), resets, and one
 * direction held while the other passes.
 *
 * <p>Every fault has a bound: it ends by itself after the duration it was given, so a test that
 * fails half-way never leaves a server unreachable for the tests after it. The proxy itself closes
 * after its lifetime (15 minutes unless told otherwise), and {@link FaultProxies} closes the proxies
 * of a test when it ends. Only loopback addresses are accepted, on both sides.
 *
 * <p>A held direction (blackhole, one way) keeps its bytes: they are read, kept in order, and
 * delivered when the fault ends, as TCP delivers after a partition heals. A client that gave up in
 * the meantime has closed its socket by then.
 */
public final class FaultProxy implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(FaultProxy.class);
  private static final Duration DEFAULT_LIFETIME = Duration.ofMinutes(15);
  private static final int CHUNK = 16 * 1024;

  /** Which way bytes travel through the proxy. */
  public enum Direction {
    /** From the client to the server. */
    UPSTREAM,
    /** From the server back to the client. */
    DOWNSTREAM
  }

  private enum Kind { PASS, LATENCY, THROTTLE, DROP_NEW, BLACKHOLE, CUT, ONE_WAY }

  /** The fault in force: what it is and until when (monotonic nanos). */
  private record Fault(Kind kind, long untilNanos, long fixedNanos, long jitterNanos,
      long bytesPerSecond, Direction passing) {
    static final Fault PASS = new Fault(Kind.PASS, Long.MAX_VALUE, 0, 0, 0, null);

    boolean holds(Direction d) {
      return kind == Kind.BLACKHOLE || (kind == Kind.ONE_WAY && d != passing);
    }
  }

  private final String name;
  private final InetSocketAddress target;
  private final ServerSocket listener;
  private final Set<Link> links = ConcurrentHashMap.newKeySet();
  private final Object changed = new Object();
  private final Thread acceptor;
  private final Thread reaper;
  private final AtomicLong accepted = new AtomicLong();
  private final AtomicLong refused = new AtomicLong();
  private final AtomicLong[] bytes = {new AtomicLong(), new AtomicLong()};
  private volatile Fault fault = Fault.PASS;
  private volatile boolean closed;

  private FaultProxy(String name, InetSocketAddress target, int listenPort, Duration lifetime)
      throws IOException {
    this.name = name;
    this.target = target;
    this.listener = new ServerSocket();
    listener.setReuseAddress(true);
    listener.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), listenPort), 128);
    this.acceptor = new Thread(this::acceptLoop, "fault-proxy-" + name + "-accept");
    acceptor.setDaemon(true);
    long lifetimeNanos = lifetime.toNanos();
    this.reaper = new Thread(() -> reap(lifetimeNanos), "fault-proxy-" + name + "-lifetime");
    reaper.setDaemon(true);
    acceptor.start();
    reaper.start();
  }

  /** A proxy to {@code host:port} on a free loopback port, closed after 15 minutes at the latest. */
  public static FaultProxy to(String name, String host, int port) {
    return to(name, host, port, 0, DEFAULT_LIFETIME);
  }

  /**
   * A proxy to {@code host:port} listening on {@code listenPort} (0 for a free one), closed after
   * {@code lifetime} at the latest.
   */
  public static FaultProxy to(String name, String host, int port, int listenPort,
      Duration lifetime) {
    Objects.requireNonNull(name, "name");
    InetSocketAddress target = new InetSocketAddress(host, port);
    if (target.isUnresolved() || !target.getAddress().isLoopbackAddress()) {
      throw new IllegalArgumentException("A fault proxy only forwards to this machine's loopback"
          + " address; " + host + ":" + port + " is not one");
    }
    if (lifetime.isNegative() || lifetime.isZero()) {
      throw new IllegalArgumentException("lifetime must be positive: " + lifetime);
    }
    try {
      return new FaultProxy(name, target, listenPort, lifetime);
    } catch (IOException e) {
      throw new IllegalStateException("Could not open fault proxy '" + name + "' on port "
          + listenPort + ": " + e, e);
    }
  }

  /** The loopback port clients connect to instead of the server's. */
  public int port() {
    return listener.getLocalPort();
  }

  /** The host clients connect to: the loopback address, as a literal. */
  public String host() {
    return listener.getInetAddress().getHostAddress();
  }

  /** {@code host:port} of the proxy, for connection strings. */
  public String address() {
    return host() + ":" + port();
  }

  /** Ends any fault: bytes pass at once, and held bytes are delivered. */
  public FaultProxy pass() {
    return set(Fault.PASS);
  }

  /** Delays every chunk in both directions by {@code fixed} plus up to {@code jitter}, in order. */
  public FaultProxy latency(Duration fixed, Duration jitter, Duration bound) {
    requireNotNegative(fixed, "fixed");
    requireNotNegative(jitter, "jitter");
    return set(new Fault(Kind.LATENCY, until(bound), fixed.toNanos(), jitter.toNanos(), 0, null));
  }

  /** Limits each direction of each connection to {@code bytesPerSecond}. */
  public FaultProxy throttle(long bytesPerSecond, Duration bound) {
    if (bytesPerSecond <= 0) {
      throw new IllegalArgumentException("bytesPerSecond must be positive: " + bytesPerSecond);
    }
    return set(new Fault(Kind.THROTTLE, until(bound), 0, 0, bytesPerSecond, null));
  }

  /** New connections are accepted and closed at once; open ones pass. */
  public FaultProxy dropNewConnections(Duration bound) {
    return set(new Fault(Kind.DROP_NEW, until(bound), 0, 0, 0, null));
  }

  /**
   * Nothing gets through in either direction: open connections stay open and silent, new ones are
   * accepted and never answered (a half-open peer, a partition that drops packets).
   */
  public FaultProxy blackhole(Duration bound) {
    return set(new Fault(Kind.BLACKHOLE, until(bound), 0, 0, 0, null));
  }

  /**
   * Bytes in {@code passing} go through; the other direction is held (a one-way partition): with
   * {@link Direction#UPSTREAM} the server gets requests and the client never hears back.
   */
  public FaultProxy oneWay(Direction passing, Duration bound) {
    Objects.requireNonNull(passing, "passing");
    return set(new Fault(Kind.ONE_WAY, until(bound), 0, 0, 0, passing));
  }

  /** Closes every open connection and refuses new ones (closed on accept) for {@code bound}. */
  public FaultProxy cut(Duration bound) {
    set(new Fault(Kind.CUT, until(bound), 0, 0, 0, null));
    closeLinks(false);
    return this;
  }

  /** Resets (TCP RST) every open connection once; new connections pass. */
  public FaultProxy resetConnections() {
    closeLinks(true);
    return this;
  }

  /** Connections accepted so far, dropped or refused ones included. */
  public long connectionsAccepted() {
    return accepted.get();
  }

  /** Connections closed on accept by {@link #dropNewConnections} or {@link #cut}. */
  public long connectionsRefused() {
    return refused.get();
  }

  /** Connections open through the proxy now. */
  public int openConnections() {
    return links.size();
  }

  /** Bytes forwarded in {@code direction} so far. */
  public long bytesForwarded(Direction direction) {
    return bytes[direction.ordinal()].get();
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      listener.close();
    } catch (IOException e) {
      LOG.debug("Closing the listener of fault proxy '{}'", name, e);
    }
    closeLinks(false);
    synchronized (changed) {
      changed.notifyAll();
    }
    reaper.interrupt();
  }

  @Override
  public String toString() {
    return "FaultProxy[" + name + " " + address() + " -> " + target.getPort() + ", " + current()
        .kind() + "]";
  }

  private FaultProxy set(Fault next) {
    if (closed) {
      throw new IllegalStateException("Fault proxy '" + name + "' is closed");
    }
    fault = next;
    LOG.info("Fault proxy '{}': {}", name, next.kind() == Kind.PASS ? "pass" : next);
    synchronized (changed) {
      changed.notifyAll();
    }
    return this;
  }

  private Fault current() {
    Fault f = fault;
    if (f.kind() != Kind.PASS && System.nanoTime() - f.untilNanos() >= 0) {
      return Fault.PASS;
    }
    return f;
  }

  private static long until(Duration bound) {
    Objects.requireNonNull(bound, "bound");
    if (bound.isNegative() || bound.isZero()) {
      throw new IllegalArgumentException("Every fault needs a positive bound: " + bound);
    }
    return System.nanoTime() + bound.toNanos();
  }

  private static void requireNotNegative(Duration d, String what) {
    if (Objects.requireNonNull(d, what).isNegative()) {
      throw new IllegalArgumentException(what + " must not be negative: " + d);
    }
  }

  private void reap(long lifetimeNanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(lifetimeNanos);
      LOG.warn("Fault proxy '{}' closes itself: its lifetime ended", name);
      close();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void acceptLoop() {
    while (!closed) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        if (!closed) {
          LOG.warn("Fault proxy '{}' stops accepting: {}", name, e.toString());
        }
        return;
      }
      accepted.incrementAndGet();
      Kind kind = current().kind();
      if (kind == Kind.DROP_NEW || kind == Kind.CUT) {
        refused.incrementAndGet();
        closeQuietly(client, false);
        continue;
      }
      Link link = new Link(client);
      links.add(link);
      Thread opener = new Thread(link::open, "fault-proxy-" + name + "-connect");
      opener.setDaemon(true);
      opener.start();
    }
  }

  private void closeLinks(boolean reset) {
    List<Link> open = new ArrayList<>(links);
    for (Link link : open) {
      link.close(reset);
    }
  }

  /** Waits while {@code direction} is held; false if the proxy or link closed meanwhile. */
  private Fault awaitPassable(Direction direction, Link link) throws InterruptedException {
    while (true) {
      Fault f = current();
      if (closed || link.closed) {
        return null;
      }
      if (!f.holds(direction)) {
        return f;
      }
      long waitMillis = Math.max(1, Math.min(50,
          TimeUnit.NANOSECONDS.toMillis(f.untilNanos() - System.nanoTime()) + 1));
      synchronized (changed) {
        changed.wait(waitMillis);
      }
    }
  }

  private static void closeQuietly(Socket socket, boolean reset) {
    try {
      if (reset) {
        socket.setSoLinger(true, 0);
      }
      socket.close();
    } catch (IOException e) {
      // already gone
    }
  }

  /** One client connection and its connection to the server. */
  private final class Link {
    private final Socket client;
    private volatile Socket server;
    private volatile boolean closed;
    private int halfClosed;

    Link(Socket client) {
      this.client = client;
    }

    void open() {
      // A blackhole also swallows new connections: the client's connect succeeds, then silence.
      try {
        if (awaitPassable(Direction.UPSTREAM, this) == null) {
          close(false);
          return;
        }
        Socket s = new Socket();
        s.setTcpNoDelay(true);
        s.connect(target, 10_000);
        client.setTcpNoDelay(true);
        server = s;
        if (closed) {
          closeQuietly(s, false);
          return;
        }
        start(client, s, Direction.UPSTREAM);
        start(s, client, Direction.DOWNSTREAM);
      } catch (IOException e) {
        LOG.debug("Fault proxy '{}' could not reach {}: {}", name, target, e.toString());
        close(true);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        close(false);
      }
    }

    private void start(Socket from, Socket to, Direction direction) {
      LinkedBlockingQueue<Chunk> queue = new LinkedBlockingQueue<>();
      Thread reader = new Thread(() -> read(from, queue, direction),
          "fault-proxy-" + name + "-" + direction.name().toLowerCase() + "-read");
      Thread writer = new Thread(() -> write(to, queue, direction),
          "fault-proxy-" + name + "-" + direction.name().toLowerCase() + "-write");
      reader.setDaemon(true);
      writer.setDaemon(true);
      reader.start();
      writer.start();
    }

    private void read(Socket from, LinkedBlockingQueue<Chunk> queue, Direction direction) {
      long lastRelease = 0;
      try {
        InputStream in = from.getInputStream();
        byte[] buffer = new byte[CHUNK];
        while (true) {
          int n = in.read(buffer);
          if (n < 0) {
            break;
          }
          Fault f = current();
          long release = System.nanoTime();
          if (f.kind() == Kind.LATENCY) {
            long jitter = f.jitterNanos() == 0 ? 0
                : ThreadLocalRandom.current().nextLong(f.jitterNanos() + 1);
            release += f.fixedNanos() + jitter;
          }
          // Latency never reorders bytes: a chunk leaves no earlier than the one before it.
          release = Math.max(release, lastRelease);
          lastRelease = release;
          byte[] copy = new byte[n];
          System.arraycopy(buffer, 0, copy, 0, n);
          queue.put(new Chunk(copy, release));
        }
        queue.put(Chunk.END);
      } catch (IOException e) {
        putQuietly(queue, Chunk.ABORT);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        putQuietly(queue, Chunk.ABORT);
      }
    }

    private void write(Socket to, LinkedBlockingQueue<Chunk> queue, Direction direction) {
      try {
        OutputStream out = to.getOutputStream();
        while (true) {
          Chunk chunk = queue.poll(200, TimeUnit.MILLISECONDS);
          if (chunk == null) {
            if (closed || FaultProxy.this.closed) {
              return;
            }
            continue;
          }
          if (chunk == Chunk.ABORT) {
            close(false);
            return;
          }
          if (chunk == Chunk.END) {
            halfClose(to);
            return;
          }
          long wait = chunk.releaseNanos() - System.nanoTime();
          if (wait > 0) {
            TimeUnit.NANOSECONDS.sleep(wait);
          }
          Fault f = awaitPassable(direction, this);
          if (f == null) {
            return;
          }
          if (f.kind() == Kind.THROTTLE) {
            writeThrottled(out, chunk.data(), f.bytesPerSecond(), direction);
          } else {
            // Counted before the write: a test that has seen the bytes arrive sees them counted.
            bytes[direction.ordinal()].addAndGet(chunk.data().length);
            out.write(chunk.data());
            out.flush();
          }
        }
      } catch (IOException e) {
        close(false);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        close(false);
      }
    }

    private void writeThrottled(OutputStream out, byte[] data, long perSecond,
        Direction direction) throws IOException, InterruptedException {
      int slice = (int) Math.max(1, Math.min(data.length, perSecond / 20));
      for (int at = 0; at < data.length; at += slice) {
        int len = Math.min(slice, data.length - at);
        long started = System.nanoTime();
        bytes[direction.ordinal()].addAndGet(len);
        out.write(data, at, len);
        out.flush();
        long due = started + len * 1_000_000_000L / perSecond;
        long wait = due - System.nanoTime();
        if (wait > 0) {
          TimeUnit.NANOSECONDS.sleep(wait);
        }
      }
    }

    private void halfClose(Socket to) {
      boolean both;
      synchronized (this) {
        halfClosed++;
        both = halfClosed == 2;
      }
      try {
        to.shutdownOutput();
      } catch (IOException e) {
        // the other side is already gone
      }
      if (both) {
        close(false);
      }
    }

    void close(boolean reset) {
      closed = true;
      links.remove(this);
      closeQuietly(client, reset);
      Socket s = server;
      if (s != null) {
        closeQuietly(s, reset);
      }
    }
  }

  private static void putQuietly(LinkedBlockingQueue<Chunk> queue, Chunk chunk) {
    queue.offer(chunk);
  }

  private record Chunk(byte[] data, long releaseNanos) {
    static final Chunk END = new Chunk(new byte[0], 0);
    static final Chunk ABORT = new Chunk(new byte[0], 0);
  }
}
