package dev.sluice.testkit.mongo;

import com.mongodb.client.MongoClient;
import com.mongodb.client.MongoDatabase;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * One {@link InMemoryMongo} per test class: the embedded server, or the real deployment named by
 * {@code -Dsluice.mongodb.uri}:
 *
 * <pre>{@code
 * @RegisterExtension static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
 * ... MONGO.client().getDatabase("x") ...
 * }</pre>
 */
public final class EmbeddedMongoExtension implements BeforeAllCallback, AfterAllCallback {
  private InMemoryMongo mongo;

  @Override
  public void beforeAll(ExtensionContext context) {
    mongo = new InMemoryMongo();
  }

  @Override
  public void afterAll(ExtensionContext context) {
    InMemoryMongo closing = mongo;
    // The extension lives in a static field for as long as its test class stays loaded (the whole
    // test JVM): keeping the closed server would keep every document it ever held. A full module
    // run filled the heap that way.
    mongo = null;
    if (closing != null) {
      closing.close();
    }
  }

  public EmbeddedMongo server() {
    return started().server();
  }

  /** The connection string of the deployment under test (for child JVMs). */
  public String connectionString() {
    return started().uri();
  }

  /** Whether the tests run on the embedded server. */
  public boolean embedded() {
    return started().embedded();
  }

  public MongoClient client() {
    return started().client();
  }

  /** A database with a unique name, so tests sharing the server never see each other's data. */
  public MongoDatabase freshDatabase() {
    return started().freshDatabase();
  }

  private InMemoryMongo started() {
    if (mongo == null) {
      throw new IllegalStateException("EmbeddedMongoExtension is used before beforeAll: register it "
          + "on a static field with @RegisterExtension");
    }
    return mongo;
  }
}
