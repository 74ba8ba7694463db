package dev.sluice.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import dev.sluice.listener.Handler;
import dev.sluice.testkit.mongo.EmbeddedMongoExtension;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.bson.BsonDocument;
import org.bson.Document;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** The SQL lease store on the application's DataSource, on the embedded PostgreSQL. */
class SqlLeaseStoreTest {
  @RegisterExtension
  static final EmbeddedMongoExtension MONGO = new EmbeddedMongoExtension();
  private static DataSource dataSource;

  @BeforeAll
  static void postgres() {
    dataSource = EmbeddedPostgresServer.shared().dataSource("starter");
  }

  /** The application's DataSource; not closed with the context (the test kit's pool is shared). */
  private static ApplicationContextRunner withDataSource(ApplicationContextRunner runner) {
    return runner.withInitializer(TestContexts.WITHOUT_SYSTEM_PROPERTIES)
        .withBean("dataSource", DataSource.class, () -> dataSource, bd -> bd.setDestroyMethodName(""));
  }

  @Test
  void aDataSourceAloneGivesTheSqlLeaseStoreAndLocksOnIt() {
    withDataSource(new ApplicationContextRunner())
        .withConfiguration(AutoConfigurations.of(SluiceMongoAutoConfiguration.class, SluiceJdbcAutoConfiguration.class,
            SluiceAutoConfiguration.class))
        .withPropertyValues("sluice.store.jdbc.table=sluice_lease_starter")
        .run(context -> {
          assertThat(context).hasNotFailed();
          assertThat(context.getBean(LeaseStore.class)).isInstanceOf(SqlLeaseStore.class);
          try (Lock lock = context.getBean(LockProvider.class).acquire("invoice-42", Duration.ofSeconds(5))) {
            assertThat(lock.token()).isPositive();
            assertThat(context.getBean(LockProvider.class).tryAcquire("invoice-42")).isEmpty();
          }
        });
  }

  @Test
  void storeTypeJdbcKeepsTheLeasesInSqlWhileTheListenerReadsMongoDb() {
    Set<String> handled = ConcurrentHashMap.newKeySet();
    String db = MONGO.freshDatabase().getName();
    withDataSource(new ApplicationContextRunner())
        .withConfiguration(TestContexts.MONGO_AND_SLUICE)
        .withBean("orderHandler", Handler.class, () -> (Handler<BsonDocument>) (c, f) -> handled.add(c.key()))
        .withPropertyValues("spring.data.mongodb.uri=" + MONGO.connectionString(), "spring.data.mongodb.database=" + db,
            "sluice.store.type=jdbc", "sluice.store.jdbc.table=sluice_lease_starter",
            "sluice.listeners.orders.handler=orderHandler", "sluice.listeners.orders.collection=orders",
            "sluice.listeners.orders.lease-duration=3s")
        .run(context -> {
          assertThat(context).hasNotFailed();
          LeaseStore store = context.getBean(LeaseStore.class);
          assertThat(store).isInstanceOf(SqlLeaseStore.class);
          MONGO.client().getDatabase(db).getCollection("orders").insertOne(new Document("_id", "o1"));
          await().atMost(Duration.ofSeconds(15)).until(() -> handled.contains("o1"));
          await().atMost(Duration.ofSeconds(15)).until(() ->
              store.read("orders/" + db + ".orders#0of1").map(r -> r.checkpoint() != null).orElse(false));
        });
  }
}
