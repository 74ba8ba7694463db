package dev.sluice.app.service.config;

import java.util.List;

/**
 * The service configuration ({@code sluice run --config sluice.yaml}): a MongoDB and the listeners
 * that relay its collections to a sink. Example:
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
 */
public record SluiceConfig(MongoSection mongodb, List<ListenerSection> listeners, HttpSection http) {

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

  /** One relayed collection. */
  public record ListenerSection(
      String collection,
      Integer partitions,
      String leaseDuration,
      CheckpointSection checkpoint,
      String bootstrap,
      String onHistoryLost,
      String onFailure,
      RetrySection retry,
      SinkSection sink,
      String group,
      String legacyCheckpoints,
      String onInvalidate) {}

  /**
   * {@code every} changes or {@code maxDelay}; progress without changes (an idle or filtered
   * collection) every {@code heartbeat}.
   */
  public record CheckpointSection(Integer every, String maxDelay, String heartbeat) {}

  public record RetrySection(Integer attempts, String initialDelay, String maxDelay) {}

  /** Exactly one of the sinks. */
  public record SinkSection(KafkaSection kafka, AmqpSection amqp, PublishSection publish) {}

  public record KafkaSection(String bootstrapServers, String topic) {}

  public record AmqpSection(String uri, String exchange) {}

  /** What is published: the change ({@code changes}, default) or domain events from a field. */
  public record PublishSection(String mode, String field, String idField, String onMissing) {}
}
