package dev.sluice.app.service;

import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import dev.sluice.app.cli.Messages;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeClusterOptions;

/**
 * Whether a sink's broker answers now, for readiness: a bounded request of its own, not the sink's
 * traffic, so an idle service reports a broker outage too. Returns null when it answers, else the
 * problem in one line.
 */
interface SinkReach extends AutoCloseable {
  int BOUND_MILLIS = (int) ServiceHealth.BOUND.toMillis();

  String problem();

  @Override
  default void close() {}

  /** Kafka: the cluster's brokers, through an admin client kept for the purpose. */
  static SinkReach kafka(String bootstrapServers) {
    return new SinkReach() {
      private Admin admin;

      @Override
      public synchronized String problem() {
        try {
          if (admin == null) {
            Properties p = new Properties();
            p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers);
            p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, BOUND_MILLIS);
            p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, BOUND_MILLIS);
            // Ask again soon after a broker comes back (the default backs off up to 1 s).
            p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 200);
            admin = Admin.create(p);
          }
          int brokers = admin.describeCluster(new DescribeClusterOptions().timeoutMs(BOUND_MILLIS))
              .nodes().get(BOUND_MILLIS + 500L, TimeUnit.MILLISECONDS).size();
          return brokers > 0 ? null : "Kafka at " + bootstrapServers + " reports no broker";
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return "interrupted while asking Kafka at " + bootstrapServers;
        } catch (Exception e) {
          // Not kept while Kafka does not answer: an idle admin client reconnects every 200 ms and
          // logs a warning each time, for as long as it lives. The next probe opens a new one.
          closeAdmin();
          return "Kafka at " + bootstrapServers + " does not answer: " + Messages.oneLine(e);
        }
      }

      private void closeAdmin() {
        if (admin != null) {
          admin.close(java.time.Duration.ZERO);
          admin = null;
        }
      }

      @Override
      public synchronized void close() {
        if (admin != null) {
          admin.close(java.time.Duration.ofSeconds(1));
          admin = null;
        }
      }
    };
  }

  /** AMQP: a connection opened and closed again. */
  static SinkReach amqp(ConnectionFactory configured) {
    return () -> {
      ConnectionFactory factory = configured.clone();
      factory.setConnectionTimeout(BOUND_MILLIS);
      factory.setHandshakeTimeout(BOUND_MILLIS);
      factory.setAutomaticRecoveryEnabled(false);
      try (Connection c = factory.newConnection("sluice-readiness")) {
        return null;
      } catch (Exception e) {
        return "the AMQP broker at " + factory.getHost() + ":" + factory.getPort() + " does not answer: "
            + Messages.oneLine(e);
      }
    };
  }
}
