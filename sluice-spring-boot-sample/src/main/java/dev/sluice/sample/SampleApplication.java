package dev.sluice.sample;

import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.util.Map;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.support.GenericApplicationContext;
import org.springframework.core.env.MapPropertySource;

/**
 * A Spring Boot application with two Sluice listeners on collection {@code orders}: {@link
 * OrderTotals}, a Handler bean declared in {@code application.yaml}, and {@link OrderAudit}, an
 * annotated method. {@link OrderWriter} writes a few orders, waits until both listeners handled
 * them, prints the health and the {@code sluice} endpoint's view and ends; with {@code
 * --sample.keep-running=true} it writes an order a second until Ctrl-C.
 *
 * <p>Without {@code spring.data.mongodb.uri} it starts the embedded MongoDB of the test kit and
 * uses database {@code shop} there; give a URI to run on your own MongoDB.
 */
@SpringBootApplication
public class SampleApplication {

  public static void main(String[] args) {
    ConfigurableApplicationContext context = application().run(args);
    if (!context.getEnvironment().getProperty("sample.keep-running", Boolean.class, false)) {
      // Closing the context stops the listeners (commit, release) and the embedded MongoDB; no
      // System.exit, so that the sample also ends cleanly inside Maven (exec:java).
      int code = SpringApplication.exit(context);
      if (code != 0) {
        System.exit(code);
      }
    }
    // Otherwise the writer's thread keeps the JVM up; Ctrl-C closes the context (the listeners
    // commit and release their leases), then the embedded MongoDB.
  }

  /** The application; starts the embedded MongoDB when no URI is configured, and closes it with the context. */
  public static SpringApplication application() {
    SpringApplication app = new SpringApplication(SampleApplication.class);
    app.addInitializers(context -> {
      if (context.getEnvironment().containsProperty("spring.data.mongodb.uri")) {
        return;
      }
      EmbeddedMongo mongo = EmbeddedMongo.start();
      context.getEnvironment().getPropertySources().addFirst(new MapPropertySource("embeddedMongo",
          Map.of("spring.data.mongodb.uri", mongo.connectionString() + "/shop")));
      // Registered before every other bean, so destroyed after them: after the listeners released
      // their leases and the MongoClient closed.
      ((GenericApplicationContext) context).getDefaultListableBeanFactory()
          .registerDisposableBean("embeddedMongo", mongo::close);
      System.out.println("Embedded MongoDB on " + mongo.connectionString() + " (give --spring.data.mongodb.uri=... for yours)");
    });
    return app;
  }
}
