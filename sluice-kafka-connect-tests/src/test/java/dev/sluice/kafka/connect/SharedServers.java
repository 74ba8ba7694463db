package dev.sluice.kafka.connect;

import dev.sluice.testkit.kafka.EmbeddedKafka;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import dev.sluice.testkit.mongo.InMemoryMongo;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;

/**
 * One embedded Kafka, one embedded MongoDB and one PostgreSQL for every test class of this module (surefire runs
 * them in one JVM): each class uses its own topics, collections or databases and Connect group, so sharing the
 * servers only saves their start-up time. Closed when the test run ends ({@link SharedServersCloser}), before
 * the JVM's shutdown hooks: Kafka's test kit deletes its log directories in a hook of its own, and a broker
 * closed by another hook at the same time found its directories gone and halted the JVM with status 1.
 */
final class SharedServers {
  private static EmbeddedKafka kafka;
  private static InMemoryMongo mongo;
  private static EmbeddedMongo embedded;

  private SharedServers() {}

  static synchronized EmbeddedKafka kafka() {
    if (kafka == null) {
      kafka = EmbeddedKafka.start();
    }
    return kafka;
  }

  /** The test kit's PostgreSQL server shared by the JVM (logical decoding on). */
  static EmbeddedPostgresServer postgres() {
    return EmbeddedPostgresServer.shared();
  }

  /**
   * The MongoDB deployment under test: the one {@code -Dsluice.mongodb.uri} names (tests then use
   * fresh database names), or the embedded server.
   */
  static synchronized InMemoryMongo mongo() {
    if (mongo == null) {
      mongo = new InMemoryMongo();
    }
    return mongo;
  }

  /**
   * The embedded MongoDB, for tests that use its test-kit controls (trimming or editing the oplog),
   * which a real deployment does not allow: started even under {@code -Dsluice.mongodb.uri}.
   */
  static synchronized EmbeddedMongo embeddedMongo() {
    if (embedded == null) {
      embedded = mongo().embedded() ? mongo().server() : EmbeddedMongo.start();
    }
    return embedded;
  }

  /** Closes what was started (the Kafka broker first: nothing runs against it any more). */
  static synchronized void close() {
    if (kafka != null) {
      kafka.close();
      kafka = null;
    }
    if (embedded != null && !mongo.embedded()) {
      embedded.close();
    }
    embedded = null;
    if (mongo != null) {
      mongo.close();
      mongo = null;
    }
  }
}
