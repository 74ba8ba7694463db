package dev.sluice.app.config;

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
 *     checkpoint: { every: 100, maxDelay: 1s }
 *     onFailure: park            # or block (default)
 *     sink:
 *       kafka: { bootstrapServers: "kafka:9092", topic: orders }
 * </pre>
 */
public record SluiceConfig(MongoSection mongodb, List<ListenerSection> listeners) {

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

  public record CheckpointSection(Integer every, String maxDelay) {}

  public record RetrySection(Integer attempts, String initialDelay, String maxDelay) {}

  /** Exactly one of the sinks. */
  public record SinkSection(KafkaSection kafka, AmqpSection amqp, PublishSection publish) {}

  public record KafkaSection(String bootstrapServers, String topic) {}

  public record AmqpSection(String uri, String exchange) {}

  /** What is published: the change ({@code changes}, default) or domain events from a field. */
  public record PublishSection(String mode, String field, String idField, String onMissing) {}
}
