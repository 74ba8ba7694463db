package dev.sluice.spring.boot;

import com.mongodb.ConnectionString;
import dev.sluice.ConfigurationException;
import org.springframework.core.env.Environment;

/** The database Sluice uses on the application's MongoClient, when a property does not name it. */
final class MongoDatabaseName {
  private MongoDatabaseName() {}

  /**
   * {@code sluice.store.mongodb.database}, else {@code spring.data.mongodb.database}, else the
   * database of {@code spring.data.mongodb.uri}: the one the application already works in.
   *
   * @throws ConfigurationException naming the property to set if none of them gives one
   */
  static String resolve(SluiceProperties properties, Environment env) {
    String db = properties.getStore().getMongodb().getDatabase();
    if (db != null && !db.isBlank()) {
      return db;
    }
    db = env.getProperty("spring.data.mongodb.database");
    if (db != null && !db.isBlank()) {
      return db;
    }
    String uri = env.getProperty("spring.data.mongodb.uri");
    if (uri != null && !uri.isBlank()) {
      try {
        db = new ConnectionString(uri).getDatabase();
      } catch (IllegalArgumentException e) {
        db = null; // Spring Boot reports a bad URI itself when it builds the client
      }
      if (db != null && !db.isBlank()) {
        return db;
      }
    }
    throw new ConfigurationException("sluice.store.mongodb.database must be set: the database of Sluice's"
        + " lease collection (and of the listeners' collections); neither spring.data.mongodb.database nor"
        + " spring.data.mongodb.uri names one");
  }
}
