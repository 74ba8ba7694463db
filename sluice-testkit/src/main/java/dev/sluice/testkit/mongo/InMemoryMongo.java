package dev.sluice.testkit.mongo;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * The MongoDB a test runs against, with one client, and a fresh database per test: the embedded
 * server, or the deployment named by {@code -Dsluice.mongodb.uri=mongodb://...} (a real replica
 * set or sharded cluster; every test database has a unique name, so a real deployment can be
 * reused). For lifecycles JUnit extensions do not reach (jqwik containers, try-with-resources);
 * JUnit classes use {@link EmbeddedMongoExtension}, which wraps one of these.
 */
public final class InMemoryMongo implements AutoCloseable {
  /** The system property naming a real deployment to run the MongoDB suites against. */
  public static final String URI_PROPERTY = "sluice.mongodb.uri";

  private final EmbeddedMongo server;
  private final MongoClient client;
  private final String uri;

  public InMemoryMongo() {
    String real = System.getProperty(URI_PROPERTY);
    if (real != null && !real.isBlank()) {
      server = null;
      uri = real;
      client = MongoClients.create(MongoClientSettings.builder()
          .applyConnectionString(new ConnectionString(real))
          .applyToClusterSettings(b -> b.serverSelectionTimeout(10, TimeUnit.SECONDS))
          .build());
    } else {
      server = EmbeddedMongo.start();
      uri = server.connectionString();
      client = server.client();
    }
  }

  /** The connection string of the deployment under test (for child JVMs). */
  public String uri() {
    return uri;
  }

  /** Whether the tests run on the embedded server (no {@code -Dsluice.mongodb.uri}). */
  public boolean embedded() {
    return server != null;
  }

  /**
   * The embedded server, for tests of its test-kit knobs.
   *
   * @throws IllegalStateException under {@code -Dsluice.mongodb.uri}: such a test needs the
   *     embedded server and starts its own instead
   */
  public EmbeddedMongo server() {
    if (server == null) {
      throw new IllegalStateException("this test uses the embedded server's test-kit controls, which a real"
          + " deployment (-D" + URI_PROPERTY + ") does not have; start an EmbeddedMongo for it instead");
    }
    return server;
  }

  public MongoClient client() {
    return client;
  }

  /** A database with a unique name, so tests sharing a server never see each other's data. */
  public MongoDatabase freshDatabase() {
    return client.getDatabase("t" + UUID.randomUUID().toString().replace("-", "").substring(0, 12));
  }

  @Override
  public void close() {
    client.close();
    if (server != null) {
      server.close();
    }
  }
}
