package dev.sluice.app.service.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.sluice.ConfigurationException;
import java.io.IOException;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The service's HTTP endpoint, on the JDK's own HTTP server:
 *
 * <ul>
 *   <li>{@code GET /health/live}: 200 while the process runs;
 *   <li>{@code GET /health/ready}: 200 when the source's database (MongoDB or PostgreSQL) answers
 *       and no partition this process runs is failed, blocked or ended; else 503 naming each problem;
 *   <li>{@code GET /status}: JSON, per listener (stream and consumer group): its partitions as this
 *       process sees them, every partition's lease record (owner, epoch, checkpoint) and the
 *       parked-change count;
 *   <li>{@code GET /metrics}: Prometheus text format (JVM, process and Sluice meters).
 * </ul>
 *
 * Bound to loopback unless configured otherwise ({@code http.address}); answers only GET and HEAD.
 */
public final class HttpEndpoint implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(HttpEndpoint.class);
  private static final ObjectMapper JSON = new ObjectMapper()
      .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS);
  private static final List<String> PATHS = List.of("/health/live", "/health/ready", "/status", "/metrics");

  /** What the endpoint reports; each call may ask the database and must be bounded. */
  public interface Probe {
    Readiness readiness();

    Map<String, Object> status();

    String metrics();
  }

  /** Ready, or the problems that make this process not ready. */
  public record Readiness(List<String> problems) {
    public boolean ready() {
      return problems.isEmpty();
    }
  }

  private final HttpServer server;
  private final ExecutorService executor;

  private HttpEndpoint(HttpServer server, ExecutorService executor) {
    this.server = server;
    this.executor = executor;
  }

  /**
   * Listens on {@code host:port} (port 0: any free port).
   *
   * @throws ConfigurationException if the address does not resolve or cannot be listened on
   */
  public static HttpEndpoint start(String host, int port, Probe probe) {
    InetSocketAddress address;
    try {
      address = new InetSocketAddress(InetAddress.getByName(host), port);
    } catch (UnknownHostException e) {
      throw new ConfigurationException("http.address '" + host + "' is not an address of this machine: " + e.getMessage());
    }
    // The JDK server writes a response's headers and body separately; with Nagle's algorithm on,
    // the body then waits for the client's delayed acknowledgement (about 40 ms per request,
    // measured in ServiceOpsBenchmark). Read once, when the JDK's server first starts.
    if (System.getProperty("sun.net.httpserver.nodelay") == null) {
      System.setProperty("sun.net.httpserver.nodelay", "true");
    }
    HttpServer server;
    try {
      server = HttpServer.create(address, 32);
    } catch (BindException e) {
      throw new ConfigurationException("http: cannot listen on " + host + ":" + port + " (" + e.getMessage()
          + "); set http.port to a free port (0: any), or http.enabled: false");
    } catch (IOException e) {
      throw new ConfigurationException("http: cannot listen on " + host + ":" + port + ": " + e.getMessage());
    }
    ExecutorService executor = Executors.newFixedThreadPool(2, r -> {
      Thread t = new Thread(r, "sluice-http");
      t.setDaemon(true);
      return t;
    });
    server.setExecutor(executor);
    server.createContext("/", exchange -> answer(exchange, probe));
    server.start();
    return new HttpEndpoint(server, executor);
  }

  /** Where it listens, with the actual port when 0 was asked for. */
  public InetSocketAddress address() {
    return server.getAddress();
  }

  private static void answer(HttpExchange exchange, Probe probe) throws IOException {
    try (exchange) {
      String method = exchange.getRequestMethod();
      if (!method.equals("GET") && !method.equals("HEAD")) {
        exchange.getResponseHeaders().add("Allow", "GET, HEAD");
        send(exchange, 405, "application/json", json(Map.of("error", "method " + method + " not allowed; use GET")));
        return;
      }
      String path = exchange.getRequestURI().getPath();
      try {
        switch (path) {
          case "/health/live" -> send(exchange, 200, "application/json", json(Map.of("status", "UP")));
          case "/health/ready" -> {
            Readiness r = probe.readiness();
            Map<String, Object> body = new LinkedHashMap<>();
            body.put("status", r.ready() ? "UP" : "DOWN");
            body.put("problems", r.problems());
            send(exchange, r.ready() ? 200 : 503, "application/json", json(body));
          }
          case "/status" -> send(exchange, 200, "application/json", json(probe.status()));
          case "/metrics" -> send(exchange, 200, "text/plain; version=0.0.4; charset=utf-8", probe.metrics());
          default -> send(exchange, 404, "application/json", json(Map.of("error", "no such path: " + path, "paths", PATHS)));
        }
      } catch (RuntimeException e) {
        log.warn("HTTP {} {} failed: {}", method, path, e.toString());
        send(exchange, 500, "application/json", json(Map.of("error", String.valueOf(e.getMessage()))));
      }
    }
  }

  private static String json(Object body) {
    try {
      return JSON.writerWithDefaultPrettyPrinter().writeValueAsString(body) + "\n";
    } catch (IOException e) {
      throw new IllegalStateException("cannot write JSON: " + e.getMessage(), e);
    }
  }

  private static void send(HttpExchange exchange, int status, String contentType, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("Content-Type", contentType);
    boolean head = exchange.getRequestMethod().equals("HEAD");
    exchange.sendResponseHeaders(status, head ? -1 : bytes.length);
    if (!head) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(bytes);
      }
    }
  }

  @Override
  public void close() {
    server.stop(0);
    executor.shutdownNow();
    try {
      executor.awaitTermination(2, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
