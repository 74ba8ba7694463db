package dev.sluice.postgres.feed;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.net.ServerSocket;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Settings that can never work are refused when the feed is built, naming the setting; a server
 * that cannot serve the feed is refused at open, naming what to change, retryable only when waiting
 * can help (the server is unreachable).
 */
class PostgresFeedBadInputTest {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private final String db = PG.createDatabase("badinput");

  @AfterEach
  void dropSlots() {
    PG.dropReplicationSlots(db);
  }

  private PostgresChangeFeed.Builder builder() {
    return PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub");
  }

  @Test
  void impossibleSettingsAreRefusedWhenBuiltNamingTheSetting() {
    assertThatThrownBy(() -> PostgresChangeFeed.builder("jdbc:mysql://db/shop", "u", null, "pub").build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("url").hasMessageContaining("jdbc:postgresql");
    assertThatThrownBy(() -> builder().table("orders").build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("table").hasMessageContaining("schema.table");
    assertThatThrownBy(() -> PostgresChangeFeed.builder(PG.jdbcUrl(db), "u", null, "my-pub").build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("publication");
    assertThatThrownBy(() -> builder().slotPrefix("a_prefix_longer_than_twenty").build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("slotPrefix");
    assertThatThrownBy(() -> builder().batchSize(0).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("batchSize");
    assertThatThrownBy(() -> builder().statusInterval(Duration.ofMinutes(2)).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("statusInterval");
    assertThatThrownBy(() -> builder().statusInterval(Duration.ofSeconds(5)).replicationTimeout(Duration.ofSeconds(5))
        .build()).isInstanceOf(ConfigurationException.class).hasMessageContaining("replicationTimeout")
        .hasMessageContaining("PT5S");
    assertThatThrownBy(() -> builder().replicationUrl("jdbc:postgresql://localhost:1/otherdb").build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("replicationUrl")
        .hasMessageContaining("otherdb").hasMessageContaining(db);
    assertThatThrownBy(() -> builder().replicationUrl("jdbc:mysql://localhost/" + db).build())
        .isInstanceOf(ConfigurationException.class).hasMessageContaining("replicationUrl")
        .hasMessageContaining("jdbc:postgresql");
    // A status interval of 50 s (below the server's default wal_sender_timeout) gets three of them.
    builder().statusInterval(Duration.ofSeconds(50)).build();
  }

  @Test
  void anUnreachableServerIsARetryableErrorNamingWhere() throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    PostgresChangeFeed feed = PostgresChangeFeed.builder("jdbc:postgresql://localhost:" + port + "/shop",
        "u", null, "pub").build();
    int closed = port;
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> {
          assertThat(e.retryable()).as("waiting can help").isTrue();
          assertThat(e.getMessage()).contains("localhost:" + closed);
        });
  }

  @Test
  void aMissingPublicationOrUnpublishedTableIsRefusedAtOpenNamingTheFix() throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS public.orders (id int PRIMARY KEY)");
      s.execute("CREATE TABLE IF NOT EXISTS public.other (id int PRIMARY KEY)");
      s.execute("DROP PUBLICATION IF EXISTS pub");
    }
    PostgresChangeFeed feed = builder().table("public.orders").build();
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> {
          assertThat(e.retryable()).isFalse();
          assertThat(e.getMessage()).contains("publication pub does not exist").contains("CREATE PUBLICATION pub");
        });
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE PUBLICATION pub FOR TABLE public.other");
    }
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> {
          assertThat(e.retryable()).as("it would stay silent for ever").isFalse();
          assertThat(e.getMessage()).contains("does not publish public.orders")
              .contains("ALTER PUBLICATION pub ADD TABLE public.orders");
        });
  }

  @Test
  void aUserWithoutTheReplicationAttributeOrAnUnknownUserIsRefusedNamingTheFix() throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS public.orders (id int PRIMARY KEY)");
      s.execute("DROP PUBLICATION IF EXISTS pub");
      s.execute("CREATE PUBLICATION pub FOR TABLE public.orders");
      s.execute("DO $$ BEGIN CREATE ROLE plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
      s.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO plain");
    }
    PostgresChangeFeed plain = PostgresChangeFeed.builder(PG.jdbcUrl(db).replace("user=postgres", "user=plain"),
        "plain", null, "pub").table("public.orders").build();
    assertThatThrownBy(() -> plain.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> {
          assertThat(e.retryable()).isFalse();
          assertThat(e.getMessage()).contains("ALTER ROLE plain REPLICATION");
        });
    PostgresChangeFeed nobody = PostgresChangeFeed.builder(PG.jdbcUrl(db).replace("user=postgres", "user=nobody"),
        "nobody", null, "pub").table("public.orders").build();
    assertThatThrownBy(() -> nobody.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> {
          assertThat(e.retryable()).as("waiting cannot create the role").isFalse();
          assertThat(e.getMessage()).contains("nobody");
        });
  }

  @Test
  void aServerWithoutLogicalDecodingIsRefusedNamingWalLevel() {
    try (EmbeddedPostgresServer replica = EmbeddedPostgresServer.start(java.util.Map.of("wal_level", "replica"))) {
      String database = replica.createDatabase("walreplica");
      try (Connection c = replica.dataSource(database).getConnection(); Statement s = c.createStatement()) {
        s.execute("CREATE TABLE public.orders (id int PRIMARY KEY)");
        s.execute("CREATE PUBLICATION pub FOR TABLE public.orders");
      } catch (java.sql.SQLException e) {
        throw new IllegalStateException(e);
      }
      PostgresChangeFeed feed = PostgresChangeFeed.builder(replica.jdbcUrl(database), EmbeddedPostgresServer.USER,
          null, "pub").table("public.orders").build();
      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
          .isInstanceOfSatisfying(FeedException.class, e -> {
            assertThat(e.retryable()).as("only a restart with another setting helps").isFalse();
            assertThat(e.getMessage()).contains("wal_level is replica").contains("wal_level = logical");
          });
    }
  }

  @Test
  void aTableWhoseChangesCarryNoKeyIsRefusedNamingTheFix() throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS public.keyless (v int)");
      s.execute("DROP PUBLICATION IF EXISTS pub");
      s.execute("CREATE PUBLICATION pub FOR TABLE public.keyless");
    }
    PostgresChangeFeed feed = builder().table("public.keyless").build();
    assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
        .isInstanceOfSatisfying(FeedException.class, e -> {
          assertThat(e.retryable()).isFalse();
          assertThat(e.getMessage()).contains("public.keyless has no primary key and replica identity DEFAULT")
              .contains("ALTER TABLE public.keyless REPLICA IDENTITY FULL");
        });
  }

  @Test
  void aSlotInUseByAnotherReaderIsNamedWithTheFix() throws Exception {
    try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE IF NOT EXISTS public.orders (id int PRIMARY KEY)");
      s.execute("DROP PUBLICATION IF EXISTS pub");
      s.execute("CREATE PUBLICATION pub FOR TABLE public.orders");
    }
    PostgresChangeFeed feed = builder().table("public.orders").build();
    try (var first = feed.open(PartitionSpec.single(), StartPoint.latest())) {
      assertThat(first.position()).isNotNull();
      assertThatThrownBy(() -> feed.open(PartitionSpec.single(), StartPoint.latest()))
          .isInstanceOfSatisfying(FeedException.class, e -> {
            assertThat(e.retryable()).as("the other reader may go away").isTrue();
            assertThat(e.getMessage()).contains("is in use by another process (PID ")
                .contains("another slotPrefix");
          });
    }
  }
}
