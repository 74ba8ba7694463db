package dev.sluice.postgres.feed;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import javax.net.SocketFactory;

/**
 * The socket factory of the feed's replication connections (pgjdbc's {@code socketFactory}
 * property; not for use by applications): each socket notes when bytes last arrived from the
 * server, so that the feed can tell a silent connection from an idle one (ADR 0106). pgjdbc
 * instantiates it with the {@code socketFactoryArg}, a token the cursor registered with {@link
 * #register} before connecting.
 */
public final class ReplicationSockets extends SocketFactory {
  /** When bytes last arrived (System.nanoTime), by token; {@link #NO_SOCKET} until the socket exists. */
  private static final Map<String, AtomicLong> HEARD = new ConcurrentHashMap<>();

  /** The time of a token whose connection made no socket through this factory (yet). */
  static final long NO_SOCKET = Long.MIN_VALUE;

  private final AtomicLong heard;

  /** Called by pgjdbc with the token of {@link #register}. */
  public ReplicationSockets(String token) {
    AtomicLong h = token == null ? null : HEARD.get(token);
    this.heard = h != null ? h : new AtomicLong(); // unknown token: nobody reads it
  }

  /** Registers a token: the time bytes last arrived on its connection ({@link #NO_SOCKET}: no socket made). */
  static AtomicLong register(String token) {
    AtomicLong h = new AtomicLong(NO_SOCKET);
    HEARD.put(token, h);
    return h;
  }

  static void unregister(String token) {
    HEARD.remove(token);
  }

  @Override
  public Socket createSocket() {
    return new Heard(heard);
  }

  @Override
  public Socket createSocket(String host, int port) throws IOException {
    return connected(null, new InetSocketAddress(host, port));
  }

  @Override
  public Socket createSocket(String host, int port, InetAddress local, int localPort) throws IOException {
    return connected(new InetSocketAddress(local, localPort), new InetSocketAddress(host, port));
  }

  @Override
  public Socket createSocket(InetAddress host, int port) throws IOException {
    return connected(null, new InetSocketAddress(host, port));
  }

  @Override
  public Socket createSocket(InetAddress host, int port, InetAddress local, int localPort) throws IOException {
    return connected(new InetSocketAddress(local, localPort), new InetSocketAddress(host, port));
  }

  /** A new socket bound to {@code local} (null: not bound first) and connected to {@code remote}. */
  private Socket connected(InetSocketAddress local, InetSocketAddress remote) throws IOException {
    Socket s = createSocket();
    if (local != null) {
      s.bind(local);
    }
    s.connect(remote);
    return s;
  }

  /** A plain socket whose input notes the time of every read that returned bytes. */
  private static final class Heard extends Socket {
    private final AtomicLong heard;
    private InputStream in;

    Heard(AtomicLong heard) {
      this.heard = heard;
      heard.set(System.nanoTime());
    }

    @Override
    public synchronized InputStream getInputStream() throws IOException {
      if (in == null) {
        in = new FilterInputStream(super.getInputStream()) {
          @Override
          public int read() throws IOException {
            int b = super.read();
            if (b >= 0) {
              heard.set(System.nanoTime());
            }
            return b;
          }

          @Override
          public int read(byte[] b, int off, int len) throws IOException {
            int n = super.read(b, off, len);
            if (n > 0) {
              heard.set(System.nanoTime());
            }
            return n;
          }
        };
      }
      return in;
    }
  }
}
