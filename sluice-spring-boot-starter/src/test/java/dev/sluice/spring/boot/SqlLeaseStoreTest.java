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

  /** {@code sluice.store.jdbc.session-liveness} (ADR 0114): leases record the holder's database session. */
  @Test
  void sessionLivenessRecordsTheHoldersSessionInItsLeases() {
    withDataSource(new ApplicationContextRunner())
        .withConfiguration(AutoConfigurations.of(SluiceMongoAutoConfiguration.class, SluiceJdbcAutoConfiguration.class,
            SluiceAutoConfiguration.class))
        .withPropertyValues("sluice.store.jdbc.table=sluice_lease_starter_sessions",
            "sluice.store.jdbc.session-liveness=500ms")
        .run(context -> {
          assertThat(context).hasNotFailed();
          try (Lock lock = context.getBean(LockProvider.class).acquire("invoice-7", Duration.ofSeconds(5));
              java.sql.Connection c = dataSource.getConnection();
              java.sql.Statement st = c.createStatement();
              java.sql.ResultSet rs = st.executeQuery("SELECT holder_pid, holder_bound_ms FROM"
                  + " sluice_lease_starter_sessions WHERE name LIKE '%invoice-7'")) {
            assertThat(lock.token()).isPositive();
            assertThat(rs.next()).isTrue();
            assertThat(rs.getObject(1)).as("the holder's session").isNotNull();
            assertThat(rs.getLong(2)).isEqualTo(500);
          }
        });
  }

  @Test
  void aSessionLivenessOutsideItsRangeFailsTheStartNamingTheProperty() {
    withDataSource(new ApplicationContextRunner())
        .withConfiguration(AutoConfigurations.of(SluiceMongoAutoConfiguration.class, SluiceJdbcAutoConfiguration.class,
            SluiceAutoConfiguration.class))
        .withPropertyValues("sluice.store.jdbc.session-liveness=10ms")
        .run(context -> assertThat(context).hasFailed().getFailure()
            .hasStackTraceContaining("sluice.store.jdbc")
            .hasStackTraceContaining("sessionLiveness")
            .hasStackTraceContaining("between 100 ms and 1 hour"));
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
