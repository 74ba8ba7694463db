package dev.sluice.spring.boot;

import dev.sluice.spring.boot.actuate.SluiceActuatorAutoConfiguration;
import java.util.ArrayList;
import java.util.List;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.mongo.MongoAutoConfiguration;
import org.springframework.context.ApplicationContextInitializer;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.core.env.StandardEnvironment;

/** What the starter's tests share. */
final class TestContexts {
  private TestContexts() {}

  /**
   * Removes the JVM's system properties from a test context's environment: the test kit's
   * {@code -Dsluice.mongodb.uri} (a real MongoDB for the suites) is under {@code sluice.*} and, as
   * no starter property, would fail the binding, as any unknown {@code -Dsluice.*} does.
   */
  static final ApplicationContextInitializer<ConfigurableApplicationContext> WITHOUT_SYSTEM_PROPERTIES =
      context -> context.getEnvironment().getPropertySources()
          .remove(StandardEnvironment.SYSTEM_PROPERTIES_PROPERTY_SOURCE_NAME);

  /** Spring Boot's MongoDB client and the starter, as an application with auto-configuration gets them. */
  static final AutoConfigurations MONGO_AND_SLUICE = AutoConfigurations.of(MongoAutoConfiguration.class,
      SluiceMongoAutoConfiguration.class, SluiceJdbcAutoConfiguration.class, SluiceAutoConfiguration.class,
      SluiceActuatorAutoConfiguration.class, SluiceShedLockAutoConfiguration.class);

  /** Every message of {@code e} and its causes, for asserting what a failed start says. */
  static String messages(Throwable e) {
    List<String> all = new ArrayList<>();
    for (Throwable t = e; t != null; t = t.getCause()) {
      all.add(t.getClass().getSimpleName() + ": " + t.getMessage());
    }
    return String.join("\n caused by ", all);
  }
}
