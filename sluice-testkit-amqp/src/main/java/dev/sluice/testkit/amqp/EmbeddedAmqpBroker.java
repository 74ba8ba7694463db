package dev.sluice.testkit.amqp;

import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.SluiceException;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.net.Ports;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.qpid.server.SystemLauncher;

/**
 * A real AMQP 0-9-1 broker inside the JVM: Apache Qpid Broker-J with a PLAIN user {@code
 * guest/guest}, on a fixed port so that {@link #stop()} and {@link #start()} simulate an outage.
 * Exchanges, queues and bindings are kept across a restart (JSON virtual-host node on disk);
 * messages are held in memory, so messages still queued when the broker stops are gone, as with
 * a crashed RabbitMQ node without durable storage: tests drain queues before stopping it.
 */
public final class EmbeddedAmqpBroker implements AutoCloseable {
  public static final String USER = "guest";
  public static final String PASSWORD = "guest";

  private final Path workDir;
  private final int port;
  private SystemLauncher launcher;

  private EmbeddedAmqpBroker(Path workDir, int port) {
    this.workDir = workDir;
    this.port = port;
  }

  /** Starts a broker on a free port (about 1-2 s). */
  public static EmbeddedAmqpBroker start() {
    Path dir;
    try {
      dir = Files.createTempDirectory("sluice-qpid");
    } catch (IOException e) {
      throw new SluiceException("Cannot create the Qpid work directory: " + e, e);
    }
    EmbeddedAmqpBroker broker = new EmbeddedAmqpBroker(dir, Ports.free());
    broker.startBroker();
    return broker;
  }

  public int port() {
    return port;
  }

  public String uri() {
    return "amqp://" + USER + ":" + PASSWORD + "@localhost:" + port + "/default";
  }

  /** A client connection factory for this broker (a new instance every call). */
  public ConnectionFactory connectionFactory() {
    ConnectionFactory f = new ConnectionFactory();
    f.setHost("localhost");
    f.setPort(port);
    f.setUsername(USER);
    f.setPassword(PASSWORD);
    f.setVirtualHost("default");
    f.setAutomaticRecoveryEnabled(false);
    return f;
  }

  /**
   * A client connection factory that connects through {@code proxy} (a {@link FaultProxy} to
   * {@link #port()}): AMQP 0-9-1 has no advertised address, so every connection made with it goes
   * through the proxy.
   */
  public ConnectionFactory connectionFactory(FaultProxy proxy) {
    ConnectionFactory f = connectionFactory();
    f.setHost(proxy.host());
    f.setPort(proxy.port());
    return f;
  }

  /** {@link #uri()} through {@code proxy}. */
  public String uri(FaultProxy proxy) {
    return "amqp://" + USER + ":" + PASSWORD + "@" + proxy.address() + "/default";
  }

  /** Declares a durable topic exchange and a durable queue bound to it with {@code bindingKey}. */
  public void declareQueue(String exchange, String queue, String bindingKey) {
    try (Connection c = connectionFactory().newConnection();
        Channel ch = c.createChannel()) {
      ch.exchangeDeclare(exchange, "topic", true);
      ch.queueDeclare(queue, true, false, false, null);
      ch.queueBind(queue, exchange, bindingKey);
    } catch (Exception e) {
      throw new SluiceException("Cannot declare " + exchange + " -> " + queue + ": " + e, e);
    }
  }

  /** Starts the broker again after {@link #stop()}, on the same port. */
  public synchronized void startBroker() {
    if (launcher != null) {
      return;
    }
    try {
      Path config = workDir.resolve("initial-config.json");
      Files.writeString(config, initialConfig(), StandardCharsets.UTF_8);
      Map<String, Object> context = new HashMap<>();
      context.put("qpid.work_dir", workDir.toString());
      context.put("qpid.amqp_port", Integer.toString(port));
      context.put("qpid.broker.defaultPreferenceStoreAttributes", "{\"type\": \"Noop\"}");
      Map<String, Object> attributes = new HashMap<>();
      attributes.put("type", "Memory");
      attributes.put("initialConfigurationLocation", config.toUri().toString());
      attributes.put("startupLoggedToSystemOut", false);
      attributes.put("context", context);
      SystemLauncher l = new SystemLauncher();
      l.startup(attributes);
      launcher = l;
    } catch (Exception e) {
      throw new SluiceException("Cannot start the embedded Qpid broker on port " + port + ": " + e, e);
    }
  }

  /** Stops the broker; connected clients see their connections closed. */
  public synchronized void stop() {
    if (launcher != null) {
      launcher.shutdown();
      launcher = null;
    }
  }

  @Override
  public void close() {
    stop();
    try (Stream<Path> files = Files.walk(workDir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      // a leftover temp directory is harmless
    }
  }

  private String initialConfig() {
    String store = workDir.resolve("vhost-config.json").toString().replace("\\", "\\\\");
    return """
        {
          "name": "sluice-embedded",
          "modelVersion": "9.0",
          "authenticationproviders": [{
            "name": "plain", "type": "Plain", "secureOnlyMechanisms": [],
            "users": [{"name": "%s", "type": "managed", "password": "%s"}]
          }],
          "ports": [{
            "name": "AMQP", "port": "%d", "authenticationProvider": "plain",
            "protocols": ["AMQP_0_9_1"],
            "virtualhostaliases": [
              {"name": "nameAlias", "type": "nameAlias"},
              {"name": "defaultAlias", "type": "defaultAlias"}]
          }],
          "virtualhostnodes": [{
            "name": "default", "type": "JSON", "defaultVirtualHostNode": "true",
            "storePath": "%s",
            "virtualHostInitialConfiguration": "{\\"type\\": \\"Memory\\"}"
          }]
        }
        """.formatted(USER, PASSWORD, port, store);
  }
}
