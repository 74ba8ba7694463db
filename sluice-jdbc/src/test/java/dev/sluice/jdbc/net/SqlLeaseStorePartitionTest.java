package dev.sluice.jdbc.net;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.feed.Position;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import dev.sluice.lock.Lock;
import dev.sluice.lock.LockProvider;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.sql.EmbeddedMariaDb;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Issue 34 item 2.1 on the SQL lease store: a lock whose connections to the database go through a
 * {@link FaultProxy} that the test blackholes (connections stay open, nothing comes back) is
 * reported lost before a peer, connected directly, can take it; and each lease-store call on such
 * a connection fails within a third of the lease (ADR 0101). On the test kit's shared PostgreSQL
 * and MariaDB. The holder's pool is HikariCP with a 500 ms connection timeout: obtaining a
 * connection is the pool's bound, not the store's.
 */
class SqlLeaseStorePartitionTest {
  @RegisterExtension
  final FaultProxies proxies = new FaultProxies();

  private static final Duration LEASE = Duration.ofSeconds(2);
  private static final Duration CUT = Duration.ofSeconds(60);
  private static final String DATABASE = "netlease";

  private final List<AutoCloseable> closing = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    proxies.passAll();
    for (int i = closing.size() - 1; i >= 0; i--) {
      closing.get(i).close();
    }
  }

  /** The two SQL databases of the test kit. */
  enum Server {
    POSTGRESQL {
      @Override
      int port() {
        return EmbeddedPostgresServer.shared().port();
      }

      @Override
      DataSource direct() {
        return EmbeddedPostgresServer.shared().dataSource(DATABASE);
      }

      @Override
      String url(FaultProxy proxy) {
        return "jdbc:postgresql://" + proxy.address() + "/" + DATABASE + "?user=" + EmbeddedPostgresServer.USER;
      }
    },
    MARIADB {
      @Override
      int port() {
        return EmbeddedMariaDb.shared().port();
      }

      @Override
      DataSource direct() {
        return EmbeddedMariaDb.shared().dataSource(DATABASE);
      }

      @Override
      String url(FaultProxy proxy) {
        return "jdbc:mariadb://" + proxy.address() + "/" + DATABASE + "?user=" + EmbeddedMariaDb.USER
            + "&sslMode=disable";
      }
    };

    abstract int port();

    /** The shared pool, straight to the server (creates the database). */
    abstract DataSource direct();

    abstract String url(FaultProxy proxy);
  }

  /** A proxy to {@code server} and a pool whose every connection goes through it. */
  private DataSource through(Server server, FaultProxy proxy) {
    server.direct(); // creates the database
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(server.url(proxy));
    config.setPoolName("cut-off-" + server);
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(500);
    config.setValidationTimeout(250);
    HikariDataSource pool = new HikariDataSource(config);
    closing.add(pool);
    return pool;
  }

  @ParameterizedTest
  @EnumSource(Server.class)
  void aLockCutOffFromTheDatabaseIsLostBeforeItsLeaseCanExpire(Server server) {
    FaultProxy proxy = proxies.to("lease-store-" + server, "127.0.0.1", server.port());
    LeaseStore holderStore = SqlLeaseStore.builder(through(server, proxy)).build();
    LeaseStore peerStore = SqlLeaseStore.builder(server.direct()).build();
    AtomicLong lostAt = new AtomicLong();
    LockProvider holder = LockProvider.on(holderStore).leaseDuration(LEASE)
        .onLost((lock, cause) -> lostAt.compareAndSet(0, System.nanoTime()))
        .build();
    closing.add(holder);
    LockProvider peer = LockProvider.on(peerStore).leaseDuration(LEASE).build();
    closing.add(peer);
    String name = "report-" + UUID.randomUUID();

    Lock lock = holder.tryAcquire(name).orElseThrow();
    assertThat(proxy.connectionsAccepted()).as("the holder's pool goes through the proxy").isPositive();
    long cutAt = System.nanoTime();
    proxy.blackhole(CUT);

    AtomicLong takenAt = new AtomicLong();
    Lock taken = await().atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(10))
        .until(() -> {
          Optional<Lock> l = peer.tryAcquire(name);
          takenAt.set(System.nanoTime());
          return l;
        }, Optional::isPresent).orElseThrow();
    closing.add(taken);

    // Told before the peer got it (the lease had expired on the database's clock), without
    // anyone asking isHeld().
    assertThat(lostAt.get()).as("the lost-lock notification fired").isNotZero();
    assertThat(lostAt.get() - cutAt).as("notification (ns) after the cut").isPositive();
    assertThat(lostAt.get() - takenAt.get()).as("notification (ns) before the peer's lock").isNegative();
    assertThat(lock.isHeld()).isFalse();
    assertThat(taken.token()).isGreaterThan(lock.token());
  }

  @ParameterizedTest
  @EnumSource(Server.class)
  void aCallOnABlackholedConnectionFailsWithinAThirdOfTheLease(Server server) {
    FaultProxy proxy = proxies.to("lease-store-" + server, "127.0.0.1", server.port());
    LeaseStore store = SqlLeaseStore.builder(through(server, proxy)).build();
    Duration lease = Duration.ofSeconds(3);
    Lease held = store.tryAcquire("orders#0of1-" + UUID.randomUUID(), "holder", lease).orElseThrow();
    long connections = proxy.connectionsAccepted();
    assertThat(connections).isPositive();

    proxy.blackhole(CUT);
    for (String call : List.of("renew", "commit", "release")) {
      long start = System.nanoTime();
      Throwable failure = catchThrowable(() -> {
        switch (call) {
          case "renew" -> store.renew(held, lease);
          case "commit" -> store.commit(held, new Position("t1", null));
          default -> store.release(held);
        }
      });
      long took = System.nanoTime() - start;
      System.out.printf("%s: %s on a blackholed connection failed after %d ms (bound %d ms + pool)%n",
          server, call, TimeUnit.NANOSECONDS.toMillis(took), lease.toMillis() / 3);
      assertThat(failure).as(call).isInstanceOfSatisfying(LeaseStoreException.class,
          e -> assertThat(e.retryable()).isTrue());
      assertThat(took).as("%s took (ns), against a lease of %s", call, lease).isLessThan(lease.toNanos());
    }

    proxy.pass();
    Lease renewed = store.renew(held, lease);
    assertThat(renewed.epoch()).isEqualTo(held.epoch());
    assertThat(proxy.connectionsAccepted()).as("a fresh connection after the timed-out one")
        .isGreaterThan(connections);
  }
}
