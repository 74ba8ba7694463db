package dev.sluice.spring.boot;

import static dev.sluice.spring.boot.TestContexts.messages;
import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.lease.LeaseStore;
import dev.sluice.listener.Handler;
import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import dev.sluice.mongodb.lease.MongoLeaseStore;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import org.bson.BsonDocument;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The beans the starter defines on the application's MongoClient, what the application can
 * override, and what it refuses at start (naming the property).
 */
class SluiceAutoConfigurationTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();

  private ApplicationContextRunner runner() {
    return new ApplicationContextRunner()
        .withInitializer(TestContexts.WITHOUT_SYSTEM_PROPERTIES)
        .withConfiguration(TestContexts.MONGO_AND_SLUICE)
        .withPropertyValues("spring.data.mongodb.uri=" + MONGO.connectionString(),
            "spring.data.mongodb.database=" + MONGO.freshDatabase().getName());
  }

  @Test
  void leaseStoreAndLockProviderOnTheApplicationsMongoClientAndLocksReleasedWithTheContext() {
    String database = MONGO.freshDatabase().getName();
    runner().withPropertyValues("sluice.store.mongodb.database=" + database, "sluice.lock.lease-duration=5s")
        .run(context -> {
          assertThat(context).hasNotFailed().hasSingleBean(LeaseStore.class).hasSingleBean(LockProvider.class);
          assertThat(context.getBean(LeaseStore.class)).isInstanceOf(MongoLeaseStore.class);
          Lock lock = context.getBean(LockProvider.class).acquire("nightly-report", Duration.ofSeconds(5));
          assertThat(lock.token()).isPositive();
        });
    // The context closed its provider, which released the lock: it is free at once, not after 5 s.
    LeaseStore store = MongoLeaseStore.builder(MONGO.client().getDatabase(database)).build();
    try (LockProvider other = LockProvider.on(store).build()) {
      Optional<Lock> again = other.tryAcquire("nightly-report");
      assertThat(again).isPresent();
      again.get().close();
    }
  }

  @Test
  void theApplicationsOwnBeansWin() {
    LeaseStore own = MongoLeaseStore.builder(MONGO.freshDatabase()).build();
    runner().withBean(LeaseStore.class, () -> own)
        .withPropertyValues("sluice.lock.enabled=false")
        .run(context -> {
          assertThat(context).hasNotFailed();
          assertThat(context.getBean(LeaseStore.class)).isSameAs(own);
          assertThat(context).doesNotHaveBean(LockProvider.class);
        });
  }

  @Test
  void withSluiceShedLockOnTheClassPathScheduledJobsRunOnSluiceLocksWithTheirToken() {
    runner().run(context -> {
      assertThat(context).hasNotFailed().hasSingleBean(net.javacrumbs.shedlock.core.LockProvider.class);
      net.javacrumbs.shedlock.core.LockingTaskExecutor executor =
          new net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor(
              context.getBean(net.javacrumbs.shedlock.core.LockProvider.class));
      net.javacrumbs.shedlock.core.LockConfiguration job = new net.javacrumbs.shedlock.core.LockConfiguration(
          java.time.Instant.now(), "nightly-job", Duration.ofMinutes(1), Duration.ZERO);
      net.javacrumbs.shedlock.core.LockingTaskExecutor.TaskResult<Long> run = executor.executeWithLock(
          () -> dev.sluice.shedlock.SluiceShedLockProvider.currentToken("nightly-job").orElseThrow(), job);
      assertThat(run.wasExecuted()).isTrue();
      assertThat(run.getResult()).isPositive();
      // The job's lock is a Sluice lock: the starter's provider sees it taken while a job holds it.
      Optional<net.javacrumbs.shedlock.core.SimpleLock> held =
          context.getBean(net.javacrumbs.shedlock.core.LockProvider.class).lock(job);
      assertThat(held).isPresent();
      assertThat(context.getBean(LockProvider.class).tryAcquire("nightly-job")).isEmpty();
      held.get().unlock();
    });
    net.javacrumbs.shedlock.core.LockProvider own = configuration -> Optional.empty();
    runner().withBean(net.javacrumbs.shedlock.core.LockProvider.class, () -> own)
        .run(context -> assertThat(context.getBean(net.javacrumbs.shedlock.core.LockProvider.class))
            .isSameAs(own));
  }

  @Test
  void withoutAMongoClientOrDataSourceTheStarterDefinesNoStore() {
    new ApplicationContextRunner()
        .withInitializer(TestContexts.WITHOUT_SYSTEM_PROPERTIES)
        .withConfiguration(AutoConfigurations.of(
            SluiceMongoAutoConfiguration.class, SluiceJdbcAutoConfiguration.class, SluiceAutoConfiguration.class))
        .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(LeaseStore.class)
            .doesNotHaveBean(LockProvider.class).hasSingleBean(SluiceListeners.class));
  }

  @Test
  void aMisspeltPropertyFailsTheStartNamingIt() {
    assertStartFails(runner().withPropertyValues("sluice.lock.lease-duraton=5s"), "sluice.lock.lease-duraton");
    assertStartFails(runner().withPropertyValues("sluice.listners.orders.collection=orders"),
        "sluice.listners.orders.collection");
  }

  @Test
  void aMisspeltPropertyInsideAListenerEntryFailsTheStartNamingIt() {
    assertStartFails(runner().withBean("orderHandler", Handler.class, () -> (Handler<BsonDocument>) (c, f) -> { })
            .withPropertyValues("sluice.listeners.orders.handler=orderHandler",
                "sluice.listeners.orders.colection=orders"),
        "sluice.listeners.orders.colection");
  }

  @Test
  void aBadValueFailsTheStartNamingTheProperty() {
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.partitions=0"),
        "sluice.listeners.orders.partitions must be in [1, 4096], but was 0");
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.bootstrap=yesterday"),
        "sluice.listeners.orders.bootstrap must be oldest, latest, snapshot or an ISO-8601 instant");
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.on-failure=retry"),
        "sluice.listeners.orders.on-failure");
  }

  @Test
  void whatTheListenerBuilderRefusesFailsTheStartNamingTheListener() {
    assertStartFails(runner().withBean("orderHandler", Handler.class, () -> (Handler<BsonDocument>) (c, f) -> { })
            .withPropertyValues("sluice.listeners.orders.handler=orderHandler", "sluice.listeners.orders.collection=orders",
                "sluice.listeners.orders.lease-duration=3s", "sluice.listeners.orders.renew-interval=2s"),
        "sluice.listeners.orders: renewInterval must be at most a third of leaseDuration");
  }

  @Test
  void aListenerWithoutHandlerOrWithAnUnknownHandlerBeanFailsTheStartNamingTheProperty() {
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.collection=orders"),
        "sluice.listeners.orders.handler must name a bean of type dev.sluice.listener.Handler");
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.collection=orders",
        "sluice.listeners.orders.handler=nope"), "sluice.listeners.orders.handler names bean 'nope', which does not exist");
  }

  @Test
  void theBuildWritesPropertyMetadataForIdes() throws Exception {
    try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
      assertThat(in).as("spring-configuration-metadata.json written by the configuration processor").isNotNull();
      String json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
      assertThat(json).contains("\"sluice.store.type\"", "\"sluice.listeners\"", "\"sluice.lock.lease-duration\"",
          "\"management.health.sluice.enabled\"", "ListenerProperties");
      // The fields take these defaults from the library's constants, which the processor cannot
      // read; additional-spring-configuration-metadata.json states them for IDEs, and must agree.
      com.fasterxml.jackson.databind.JsonNode properties = new com.fasterxml.jackson.databind.ObjectMapper()
          .readTree(json).get("properties");
      java.util.Map<String, String> defaults = new java.util.HashMap<>();
      properties.forEach(p -> defaults.put(p.get("name").asText(), p.path("defaultValue").asText(null)));
      org.springframework.boot.convert.ApplicationConversionService conversion =
          new org.springframework.boot.convert.ApplicationConversionService();
      assertThat(conversion.convert(defaults.get("sluice.lock.lease-duration"), java.time.Duration.class))
          .isEqualTo(dev.sluice.lock.LockProvider.DEFAULT_LEASE_DURATION);
      assertThat(defaults.get("sluice.lock.name-prefix")).isEqualTo(dev.sluice.lock.LockProvider.DEFAULT_NAME_PREFIX);
      assertThat(conversion.convert(defaults.get("sluice.store.mongodb.operation-timeout"), java.time.Duration.class))
          .isEqualTo(MongoLeaseStore.DEFAULT_OPERATION_TIMEOUT);
      SluiceProperties bound = new SluiceProperties();
      assertThat(bound.getLock().getLeaseDuration()).isEqualTo(dev.sluice.lock.LockProvider.DEFAULT_LEASE_DURATION);
    }
  }

  /** A listener entry's settings take their defaults and rules from ListenerSettings. */
  @Test
  void aListenerEntryHasTheDefaultsAndRulesOfListenerSettings() {
    SluiceProperties.ListenerProperties l = new SluiceProperties.ListenerProperties();
    assertThat(l.getLeaseDuration()).isEqualTo(dev.sluice.listener.ListenerSettings.LEASE_DURATION.defaultValue());
    assertThat(l.getConcurrency()).isEqualTo(dev.sluice.listener.ListenerSettings.CONCURRENCY.defaultValue());
    assertThat(l.getCheckpoint().getHeartbeat()).isEqualTo(dev.sluice.listener.ListenerSettings.CHECKPOINT_HEARTBEAT.defaultValue());
    assertThat(l.getOnHistoryLost()).isEqualTo(dev.sluice.listener.HistoryLostPolicy.STOP);
    assertThat(l.getOnFailure()).isEqualTo(SluiceProperties.FailureMode.BLOCK);
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.poll-wait=0s"),
        "sluice.listeners.orders.poll-wait must be positive, but was PT0S");
    assertStartFails(runner().withPropertyValues("sluice.listeners.orders.checkpoint.flushes-in-flight=-1"),
        "sluice.listeners.orders.checkpoint.flushes-in-flight must be 0 (each checkpoint waits for its flush) to 1000,"
            + " but was -1");
  }

  private static void assertStartFails(ApplicationContextRunner runner, String expected) {
    runner.run(context -> {
      assertThat(context).hasFailed();
      assertThat(messages(context.getStartupFailure())).contains(expected);
    });
  }
}
