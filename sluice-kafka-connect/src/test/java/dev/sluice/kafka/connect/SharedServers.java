package dev.sluice.kafka.connect;

import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;

/**
 * One embedded Kafka, one embedded MongoDB and one PostgreSQL for every test class of this module (surefire runs
 * them in one JVM): each class uses its own topics, collections or databases and Connect group, so sharing the
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

  /** The test kit's PostgreSQL server shared by the JVM (logical decoding on). */
  static EmbeddedPostgresServer postgres() {
    return EmbeddedPostgresServer.shared();
  }

  static synchronized EmbeddedMongo mongo() {
    if (mongo == null) {
      mongo = EmbeddedMongo.start();
      Runtime.getRuntime().addShutdownHook(new Thread(mongo::close));
    }
    return mongo;
  }
}
