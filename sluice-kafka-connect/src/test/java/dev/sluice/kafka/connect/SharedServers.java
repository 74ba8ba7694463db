package dev.sluice.kafka.connect;

import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;

/**
 * One embedded Kafka and one embedded MongoDB for every test class of this module (surefire runs
 * them in one JVM): each class uses its own topics, collections and Connect group, so sharing the
 * servers only saves their start-up time. Closed when the JVM exits.
 */
final class SharedServers {
  private static EmbeddedKafka kafka;
  private static EmbeddedMongo mongo;

  private SharedServers() {}

  static synchronized EmbeddedKafka kafka() {
    if (kafka == null) {
      kafka = EmbeddedKafka.start();
      Runtime.getRuntime().addShutdownHook(new Thread(kafka::close));
    }
    return kafka;
  }

  static synchronized EmbeddedMongo mongo() {
    if (mongo == null) {
      mongo = EmbeddedMongo.start();
      Runtime.getRuntime().addShutdownHook(new Thread(mongo::close));
    }
    return mongo;
  }
}
