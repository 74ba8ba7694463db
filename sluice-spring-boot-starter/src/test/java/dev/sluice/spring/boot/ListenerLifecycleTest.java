package dev.sluice.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.mongodb.client.MongoCollection;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import dev.sluice.listener.PartitionState;
import dev.sluice.listener.PartitionStatus;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.IntStream;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.autoconfigure.mongo.MongoAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Listeners declared as beans, in real application contexts on the embedded MongoDB: they receive
 * changes, publish meters, share partitions across two contexts, and a context that closes hands
 * its partitions over at once.
 */
class ListenerLifecycleTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  /** Every order id handled, by any listener of any context of a test (a JVM-wide sink, like a database). */
  static final Set<String> HANDLED = ConcurrentHashMap.newKeySet();
  static final Set<String> AUDITED = ConcurrentHashMap.newKeySet();

  /** An application: a Handler bean for {@code orders}, a @SluiceListener method for {@code audit}, a registry. */
  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration({MongoAutoConfiguration.class, SluiceMongoAutoConfiguration.class,
      SluiceAutoConfiguration.class})
  static class App {
    @Bean
    Handler<BsonDocument> orderHandler() {
      return (change, fence) -> HANDLED.add(change.key());
    }

    @Bean
    Auditor auditor() {
      return new Auditor();
    }

    @Bean
    MeterRegistry meterRegistry() {
      return new SimpleMeterRegistry();
    }
  }

  /** A bean with an annotated handler method. */
  static class Auditor {
    @SluiceListener(value = "audit", collection = "orders")
    void on(ChangeEvent<BsonDocument> change, Fence fence) {
      assertThat(fence.epoch()).isPositive();
      AUDITED.add(change.key());
    }
  }

  private static ConfigurableApplicationContext start(String database, String... properties) {
    return new SpringApplicationBuilder(App.class)
        .web(WebApplicationType.NONE)
        .initializers(TestContexts.WITHOUT_SYSTEM_PROPERTIES)
        .logStartupInfo(false)
        .properties("spring.main.banner-mode=off", "spring.data.mongodb.uri=" + MONGO.connectionString(),
            "spring.data.mongodb.database=" + database,
            "sluice.listeners.orders.handler=orderHandler", "sluice.listeners.orders.collection=orders",
            "sluice.listeners.orders.lease-duration=3s", "sluice.listeners.audit.lease-duration=3s")
        .properties(properties)
        .run();
  }

  private static void insert(String database, int from, int to) {
    MongoCollection<Document> orders = MONGO.client().getDatabase(database).getCollection("orders");
    IntStream.range(from, to).forEach(i -> orders.insertOne(new Document("_id", "o" + i).append("amount", i)));
  }

  private static Set<String> ids(int from, int to) {
    return Set.copyOf(IntStream.range(from, to).mapToObj(i -> "o" + i).toList());
  }

  private static long held(ConfigurableApplicationContext context, String listener) {
    return context.getBean(SluiceListeners.class).get(listener).orElseThrow().status().stream()
        .filter(s -> s.state() == PartitionState.ACTIVE).count();
  }

  @Test
  void aHandlerBeanAndAnAnnotatedMethodReceiveTheChangesAndTheMetersAreInTheApplicationsRegistry() {
    String db = MONGO.freshDatabase().getName();
    try (ConfigurableApplicationContext context = start(db)) {
      assertThat(context.getBean("sluiceListener.orders", SluiceListenerContainer.class).isRunning()).isTrue();
      assertThat(context.getBean("sluiceListener.audit", SluiceListenerContainer.class).isRunning()).isTrue();
      insert(db, 0, 20);
      await().atMost(Duration.ofSeconds(20)).until(() -> HANDLED.containsAll(ids(0, 20))
          && AUDITED.containsAll(ids(0, 20)));
      MeterRegistry registry = context.getBean(MeterRegistry.class);
      await().atMost(Duration.ofSeconds(10)).untilAsserted(() ->
          assertThat(registry.get("sluice.changes.delivered").tag("group", "orders").counter().count())
              .isGreaterThanOrEqualTo(20));
      assertThat(registry.get("sluice.partition.active").tag("lease", "orders/" + db + ".orders#0of1").gauge().value())
          .isEqualTo(1.0);
      assertThat(registry.find("sluice.partition.lag.seconds").gauges()).isNotEmpty();
    }
  }

  @Test
  void twoContextsShareThePartitionsAndTheOneThatStaysTakesOverAtOnceWhenTheOtherCloses() {
    String db = MONGO.freshDatabase().getName();
    // A 6 s lease is renewed every 2 s, so it has at least 4 s left when A closes: a takeover
    // within 3.5 s comes from the release, not from the expiry.
    String[] twoPartitions = {"sluice.listeners.orders.partitions=2", "sluice.listeners.orders.lease-duration=6s",
        "sluice.listeners.orders.acquire-interval=500ms", "sluice.listeners.audit.auto-startup=false"};
    ConfigurableApplicationContext a = start(db, twoPartitions);
    try (ConfigurableApplicationContext b = start(db, twoPartitions)) {
      await().atMost(Duration.ofSeconds(20)).until(() -> held(a, "orders") == 1 && held(b, "orders") == 1);
      insert(db, 0, 20);
      await().atMost(Duration.ofSeconds(20)).until(() -> HANDLED.containsAll(ids(0, 20)));

      String ownerA = a.getBean(SluiceListeners.class).get("orders").orElseThrow().listener().owner();
      String leaseOfA = a.getBean(SluiceListeners.class).get("orders").orElseThrow().status().stream()
          .filter(s -> s.state() == PartitionState.ACTIVE).map(PartitionStatus::lease).findFirst().orElseThrow();
      a.close();
      // Closing released the lease (it did not wait to expire): it is free or already B's.
      LeaseRecord record = b.getBean(LeaseStore.class).read(leaseOfA).orElseThrow();
      assertThat(record.owner()).as("holder of %s right after A closed", leaseOfA).isNotEqualTo(ownerA);
      // B takes it over within a second or two, well before A's lease would have expired.
      await().atMost(Duration.ofMillis(3500)).until(() -> held(b, "orders") == 2);

      insert(db, 20, 40);
      await().atMost(Duration.ofSeconds(20)).until(() -> HANDLED.containsAll(ids(20, 40)));
      List<LeaseRecord> records = b.getBean(LeaseStore.class).list("orders/" + db + ".orders#");
      String ownerB = b.getBean(SluiceListeners.class).get("orders").orElseThrow().listener().owner();
      assertThat(records).hasSize(2).allSatisfy(r -> assertThat(r.owner()).isEqualTo(ownerB));
    } finally {
      a.close();
    }
  }
}
