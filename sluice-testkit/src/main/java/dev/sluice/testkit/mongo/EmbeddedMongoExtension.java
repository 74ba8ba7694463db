package dev.sluice.testkit.mongo;

import com.mongodb.client.MongoClient;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * One embedded MongoDB and one client per test class:
 *
 * <pre>{@code
 * @RegisterExtension static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
 * ... MONGO.client().getDatabase("x") ...
 * }</pre>
 */
public final class EmbeddedMongoExtension implements BeforeAllCallback, AfterAllCallback {
  private EmbeddedMongo server;
  private MongoClient client;

  @Override
  public void beforeAll(ExtensionContext context) {
    server = EmbeddedMongo.start();
    client = server.client();
  }

  @Override
  public void afterAll(ExtensionContext context) {
    if (client != null) {
      client.close();
    }
    if (server != null) {
      server.close();
    }
  }

  public EmbeddedMongo server() {
    return requireStarted(server);
  }

  public MongoClient client() {
    return requireStarted(client);
  }

  private static <T> T requireStarted(T value) {
    if (value == null) {
      throw new IllegalStateException("EmbeddedMongoExtension is used before beforeAll: register it "
          + "on a static field with @RegisterExtension");
    }
    return value;
  }
}
