package dev.sluice.benchmarks.debezium;

import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * The Debezium PostgreSQL connector settings the benchmarks share: pgoutput, a given slot and publication, no
 * data snapshot.
 */
final class DebeziumConfig {
  static final String CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector";

  private DebeziumConfig() {}

  /** The connector's settings for the embedded test server's {@code db} on {@code port}. */
  static Map<String, String> postgres(int port, String db, String prefix, String slot, String publication) {
    Map<String, String> c = new LinkedHashMap<>();
    c.put("database.hostname", "localhost");
    c.put("database.port", Integer.toString(port));
    c.put("database.user", EmbeddedPostgresServer.USER);
    c.put("database.password", "");
    c.put("database.dbname", db);
    c.put("topic.prefix", prefix);
    c.put("plugin.name", "pgoutput");
    c.put("slot.name", slot);
    c.put("publication.name", publication);
    c.put("publication.autocreate.mode", "disabled");
    c.put("snapshot.mode", "no_data");
    return c;
  }

  /** {@link #postgres} for an embedded Debezium engine named {@code name}, its offsets kept in memory. */
  static Properties embedded(String name, int port, String db, String prefix, String slot, String publication) {
    Properties p = new Properties();
    p.setProperty("name", name);
    p.setProperty("connector.class", CONNECTOR);
    p.setProperty("offset.storage", "org.apache.kafka.connect.storage.MemoryOffsetBackingStore");
    p.setProperty("offset.flush.interval.ms", "1000");
    p.putAll(postgres(port, db, prefix, slot, publication));
    return p;
  }
}
