package dev.sluice.app.service.config;

import java.util.List;

/**
 * The service configuration ({@code sluice run --config sluice.yaml}): a source (a MongoDB, or a
 * PostgreSQL publication) and the listeners that relay its collections or tables to a sink.
 * Exactly one of {@code mongodb} and {@code postgres} is set. Example:
 *
 * <pre>
 * mongodb:
 *   uri: mongodb://db1,db2,db3/?replicaSet=rs0
 *   database: shop
 * listeners:
 *   - collection: orders
 *     group: orders-to-kafka     # default: kafka-&lt;topic&gt; or amqp-&lt;exchange&gt;
 *     checkpoint: { every: 100, maxDelay: 1s, heartbeat: 10s }
 *     onFailure: park            # or block (default)
 *     sink:
 *       kafka: { bootstrapServers: "kafka:9092", topic: orders }
 * http:                          # optional; these are the defaults
 *   enabled: true
 *   address: 127.0.0.1           # loopback only; 0.0.0.0 to serve every interface
 *   port: 9464                   # 0: any free port (printed at start)
 * </pre>
 *
 * With PostgreSQL, {@code postgres: { url: jdbc:postgresql://db:5432/shop, user: sluice, password:
 * ..., publication: shop_pub }} instead of {@code mongodb}, and {@code table: public.orders}
 * instead of {@code collection} in each listener.
 */
public record SluiceConfig(MongoSection mongodb, PostgresSection postgres, List<ListenerSection> listeners,
    HttpSection http) {

  /** The HTTP endpoint: liveness, readiness, status and Prometheus metrics. */
  public record HttpSection(Boolean enabled, String address, Integer port) {
    /** Default port: the one Prometheus exporters commonly use. */
    public static final int DEFAULT_PORT = 9464;
    public static final String DEFAULT_ADDRESS = "127.0.0.1";

    public boolean on() {
      return enabled == null || enabled;
    }

    public String host() {
      return address == null ? DEFAULT_ADDRESS : address.trim();
    }

    public int portOrDefault() {
      return port == null ? DEFAULT_PORT : port;
    }
  }

  /** The HTTP section, defaults included when the file has none. */
  public HttpSection httpOrDefault() {
    return http == null ? new HttpSection(null, null, null) : http;
  }

  /** Where the MongoDB is and which collections Sluice keeps its state in. */
  public record MongoSection(String uri, String database, String leaseCollection, String deadLetterCollection) {}

  /**
   * A PostgreSQL database: the publication the listeners read (each through replication slots of
   * its own) and the tables Sluice keeps its leases and parked changes in, in the same database.
   */
  public record PostgresSection(String url, String user, String password, String publication, String leaseTable,
      String deadLetterTable, Boolean failoverSlots, String sessionLiveness) {
    /** Whether new slots are failover slots (PostgreSQL 17); default false. */
    public boolean failover() {
      return failoverSlots != null && failoverSlots;
    }

    /** Without the password: a section printed in a message or log line does not show it. */
    @Override
    public String toString() {
      return "PostgresSection[url=" + dev.sluice.app.cli.Secrets.mask(url) + ", user=" + user + ", password="
          + (password == null ? null : "****") + ", publication=" + publication + ", leaseTable=" + leaseTable
          + ", deadLetterTable=" + deadLetterTable + ", failoverSlots=" + failoverSlots
          + ", sessionLiveness=" + sessionLiveness + "]";
    }
  }

  /** One relayed collection (MongoDB) or table (PostgreSQL). */
  public record ListenerSection(
      String collection,
      String table,
      Integer partitions,
      Integer threads,
      Integer concurrency,
      String leaseDuration,
      String renewInterval,
      String acquireInterval,
      String pollWait,
      CheckpointSection checkpoint,
      String bootstrap,
      String onHistoryLost,
      String onFailure,
      RetrySection retry,
      SinkSection sink,
      String group,
      String legacyCheckpoints,
      String onInvalidate,
      String messages) {
    /**
     * The logical-decoding message prefixes this entry also relays (postgres only; comma-separated,
     * {@code ""} entries not allowed), empty when none (ADR 0096).
     */
    public java.util.List<String> messagePrefixes() {
      if (messages == null || messages.isBlank()) {
        return java.util.List.of();
      }
      return java.util.Arrays.stream(messages.split(",")).map(String::trim).toList();
    }

    /** The collection or, with PostgreSQL, the table ({@code schema.table}) this entry relays. */
    public String target() {
      return collection != null ? collection : table;
    }
  }

  /**
   * {@code every} changes or {@code maxDelay}; progress without changes (an idle or filtered
   * collection) every {@code heartbeat}.
   */
  public record CheckpointSection(Integer every, String maxDelay, String heartbeat,
      Integer flushesInFlight) {}

  public record RetrySection(Integer attempts, String initialDelay, String maxDelay) {}

  /** Exactly one of the sinks. */
  public record SinkSection(KafkaSection kafka, AmqpSection amqp, PublishSection publish) {}

  public record KafkaSection(String bootstrapServers, String topic) {}

  public record AmqpSection(String uri, String exchange) {}

  /** What is published: the change ({@code changes}, default) or domain events from a field. */
  public record PublishSection(String mode, String field, String idField, String onMissing) {}
}
