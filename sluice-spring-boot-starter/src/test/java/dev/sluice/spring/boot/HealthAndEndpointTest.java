package dev.sluice.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoClient;
import dev.sluice.listener.Handler;
import dev.sluice.spring.boot.actuate.SluiceEndpoint;
import dev.sluice.testkit.mongo.EmbeddedMongo;
import java.time.Duration;
import java.util.Map;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.endpoint.EndpointAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.health.HealthContributorAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.health.HealthEndpointAutoConfiguration;
import org.springframework.boot.actuate.health.CompositeHealth;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthComponent;
import org.springframework.boot.actuate.health.HealthEndpoint;
import org.springframework.boot.actuate.health.Status;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The Actuator health indicator and the {@code sluice} endpoint in a real context. Runs on an
 * embedded MongoDB of its own, also under {@code -Dsluice.mongodb.uri}: it stops the server, which
 * only the test kit's server can do.
 */
class HealthAndEndpointTest {
  private static EmbeddedMongo mongo;
  private static MongoClient client;

  @BeforeAll
  static void startServer() {
    mongo = EmbeddedMongo.start();
    client = mongo.client();
  }

  @AfterAll
  static void stopServer() {
    client.close();
    mongo.close();
  }

  private ApplicationContextRunner runner(String database) {
    return new ApplicationContextRunner()
        .withInitializer(TestContexts.WITHOUT_SYSTEM_PROPERTIES)
        .withConfiguration(TestContexts.MONGO_AND_SLUICE)
        .withConfiguration(AutoConfigurations.of(EndpointAutoConfiguration.class,
            HealthContributorAutoConfiguration.class, HealthEndpointAutoConfiguration.class))
        .withBean("orderHandler", Handler.class, () -> (Handler<BsonDocument>) (change, fence) -> {
          if (change.document() != null && change.document().containsKey("poison")) {
            throw new IllegalStateException("cannot handle " + change.key());
          }
        })
        .withPropertyValues("spring.data.mongodb.uri=" + mongo.connectionString(),
            "spring.data.mongodb.database=" + database,
            "sluice.store.mongodb.operation-timeout=2s", "sluice.health.timeout=1s",
            "sluice.listeners.orders.handler=orderHandler", "sluice.listeners.orders.collection=orders",
            "sluice.listeners.orders.lease-duration=3s",
            "sluice.listeners.orders.retry.attempts=1", "sluice.listeners.orders.retry.initial-delay=10ms",
            "sluice.listeners.orders.retry.max-delay=10ms");
  }

  private static CompositeHealth sluice(HealthEndpoint endpoint) {
    return (CompositeHealth) endpoint.healthForPath("sluice");
  }

  private static Map<String, Object> details(HealthComponent h) {
    return ((Health) h).getDetails();
  }

  @Test
  void healthIsUpWhileRunningGoesDownWhenTheDatabaseStopsAndComesBackWithIt() {
    runner("health").run(context -> {
      assertThat(context).hasNotFailed();
      HealthEndpoint health = context.getBean(HealthEndpoint.class);
      await().atMost(Duration.ofSeconds(15)).until(() -> "1".equals(String.valueOf(
          details(sluice(health).getComponents().get("orders")).get("held"))));
      CompositeHealth up = sluice(health);
      assertThat(up.getStatus()).isEqualTo(Status.UP);
      assertThat(up.getComponents()).containsKeys("leaseStore", "orders");
      assertThat(details(up.getComponents().get("orders"))).containsEntry("state", "running")
          .containsEntry("group", "orders");

      mongo.stopServer();
      try {
        await().atMost(Duration.ofSeconds(15)).until(() -> sluice(health).getStatus().equals(Status.DOWN));
        assertThat(sluice(health).getComponents().get("leaseStore").getStatus()).isEqualTo(Status.DOWN);
        assertThat(health.health().getStatus()).isEqualTo(Status.DOWN);
      } finally {
        mongo.startServer();
      }
      await().atMost(Duration.ofSeconds(30)).until(() -> sluice(health).getStatus().equals(Status.UP));
    });
  }

  @Test
  void aPartitionThatCannotGoOnMakesItsListenerDownNamingTheError() {
    runner("poison").withPropertyValues("sluice.listeners.orders.on-failure=block").run(context -> {
      HealthEndpoint health = context.getBean(HealthEndpoint.class);
      client.getDatabase("poison").getCollection("orders").insertOne(new Document("_id", "o1").append("poison", true));
      await().atMost(Duration.ofSeconds(15)).until(() -> sluice(health).getStatus().equals(Status.DOWN));
      HealthComponent orders = sluice(health).getComponents().get("orders");
      assertThat(orders.getStatus()).isEqualTo(Status.DOWN);
      assertThat(details(orders)).containsEntry("state", "failed");
      assertThat(String.valueOf(details(orders).get("errors"))).contains("BLOCKED", "cannot handle o1");
      assertThat(sluice(health).getComponents().get("leaseStore").getStatus()).isEqualTo(Status.UP);
    });
  }

  @Test
  void theEndpointShowsEachPartitionAsRunHereAndAsTheStoreHoldsIt() {
    runner("endpoint").withPropertyValues("sluice.listeners.orders.partitions=2",
        "management.endpoints.web.exposure.include=health,sluice").run(context -> {
      SluiceEndpoint endpoint = context.getBean(SluiceEndpoint.class);
      client.getDatabase("endpoint").getCollection("orders").insertOne(new Document("_id", "o1"));
      await().atMost(Duration.ofSeconds(15)).until(() -> endpoint.status().listeners().get(0).records() != null
          && endpoint.status().listeners().get(0).records().stream().allMatch(r -> r.held() && r.checkpoint() != null));
      SluiceEndpoint.ListenerView orders = endpoint.listener("orders");
      assertThat(orders.group()).isEqualTo("orders");
      assertThat(orders.stream()).isEqualTo("endpoint.orders");
      assertThat(orders.running()).isTrue();
      assertThat(orders.partitions()).hasSize(2).allSatisfy(p -> {
        assertThat(p.state()).isEqualTo("ACTIVE");
        assertThat(p.epoch()).isPositive();
        assertThat(p.lagMillis()).isGreaterThanOrEqualTo(0);
      });
      assertThat(orders.records()).hasSize(2).allSatisfy(r -> {
        assertThat(r.holder()).isEqualTo(orders.owner());
        assertThat(r.epoch()).isPositive();
      });
      assertThat(endpoint.listener("nope")).isNull();
    });
  }
}
