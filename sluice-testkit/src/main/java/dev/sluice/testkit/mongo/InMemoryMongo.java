package dev.sluice.testkit.mongo;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import java.util.UUID;

/**
 * The embedded server with one client, and a fresh database per test: for lifecycles JUnit
 * extensions do not reach (jqwik containers, try-with-resources). JUnit classes use {@link
 * EmbeddedMongoExtension}, which wraps one of these.
 */
public final class InMemoryMongo implements AutoCloseable {
  private final EmbeddedMongo server;
  private final MongoClient client;

  public InMemoryMongo() {
    server = EmbeddedMongo.start();
    client = server.client();
  }

  public String uri() {
    return server.connectionString();
  }

  public EmbeddedMongo server() {
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
    server.close();
  }
}
