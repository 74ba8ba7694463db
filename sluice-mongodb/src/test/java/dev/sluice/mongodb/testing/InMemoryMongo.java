package dev.sluice.mongodb.testing;

import com.mongodb.ConnectionString;
import com.mongodb.MongoClientSettings;
import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoClients;
import com.mongodb.client.MongoDatabase;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import java.net.InetSocketAddress;
import java.util.UUID;

/**
 * A real wire-protocol server (mongo-java-server, memory backend) in this JVM, with a client. Used
 * until the testkit's EmbeddedMongo is on this branch.
 */
public final class InMemoryMongo implements AutoCloseable {
  private final MongoServer server;
  private final MongoClient client;
  private final String uri;

  public InMemoryMongo() {
    server = new MongoServer(new MemoryBackend());
    InetSocketAddress address = server.bind();
    uri = "mongodb://" + address.getHostString() + ":" + address.getPort();
    client =
        MongoClients.create(
            MongoClientSettings.builder().applyConnectionString(new ConnectionString(uri)).build());
  }

  public String uri() {
    return uri;
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
    server.shutdownNow();
  }
}
