package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ReplicationFaultRig.REPLICATION_TIMEOUT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.feed.FeedCursor;
import dev.sluice.feed.FeedException;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.StartPoint;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 34 items 2.2 and 2.5: the PostgreSQL feed's replication connection blackholed (open and
 * silent both ways) for longer than {@code wal_sender_timeout}, while its catalog connections, the
 * lease store and the writes reach the server directly ({@link ReplicationFaultRig}).
 */
class PostgresReplicationBlackholeTest {
  @RegisterExtension final FaultProxies proxies = new FaultProxies();
  private ReplicationFaultRig rig;

  @AfterEach
  void cleanUp() {
    if (rig != null) {
      rig.close();
    }
  }

  /**
   * The feed notices the silent connection within its replication timeout (2 s, asked for a reply
   * every 500 ms), gives it up, reconnects once the network passes again (the server has ended the
   * old walsender by then, wal_sender_timeout 2 s) and resumes at its checkpoint: every update
   * written before, during and after the fault is delivered in per-key order, and the slot's
   * confirmed position never passes the committed checkpoint, sampled throughout.
   */
  @Test
  void aBlackholedReplicationConnectionIsGivenUpWithinTheReplicationTimeoutAndTheListenerResumesLosingNothing()
      throws Exception {
    rig = new ReplicationFaultRig(proxies, "pgblackhole");
    rig.start();
    rig.writeAndSampleFor(Duration.ofMillis(500));
    Integer walsender = rig.walsender();
    assertThat(walsender).as("a walsender holds the slot").isNotNull();
    long accepted = rig.proxy.connectionsAccepted();

    long faultStart = System.nanoTime();
    rig.proxy.blackhole(Duration.ofSeconds(5));
    rig.writeAndSampleFor(Duration.ofSeconds(3));
    ReplicationFaultRig.Failure detected = rig.firstFailureSince(faultStart);
    assertThat(detected).as("the listener was told the replication connection failed").isNotNull();
    long detectedMillis = TimeUnit.NANOSECONDS.toMillis(detected.atNanos() - faultStart);
    System.out.printf("blackhole noticed after %d ms (replicationTimeout %d ms)%n", detectedMillis,
        REPLICATION_TIMEOUT.toMillis());
    assertThat(detectedMillis).as("noticed within the replication timeout and a read")
        .isLessThanOrEqualTo(REPLICATION_TIMEOUT.toMillis() + 1_000);
    assertThat(detected.error()).isInstanceOf(FeedException.class)
        .hasMessageContaining("nothing arrived on the replication connection of slot " + rig.slot);
    await("the server ends the silent walsender (wal_sender_timeout 2 s) while the blackhole lasts")
        .atMost(Duration.ofMillis(1_500)).until(() -> !rig.alive(walsender));

    rig.writeAndSampleFor(Duration.ofSeconds(2)); // the blackhole ends in the meantime
    await().atMost(Duration.ofSeconds(15)).until(() -> {
      Integer now = rig.walsender();
      return now != null && !now.equals(walsender);
    });
    rig.writeAndSampleFor(Duration.ofMillis(500));
    rig.awaitAllDelivered(Duration.ofSeconds(15));
    rig.sample();

    assertThat(rig.proxy.connectionsAccepted()).as("reconnected through the proxy").isGreaterThan(accepted);
    rig.assertNothingLostAndOrderKept();
    assertThat(rig.confirmedPastCheckpoint).as("slot confirmed past the checkpoint (%d samples)", rig.samples)
        .isEmpty();
  }

  /**
   * The feed's status updates held (a one-way partition the other way round): the server's
   * messages still arrive, so the feed hears the connection; its acknowledgements never reach the
   * server, which ends the walsender after wal_sender_timeout (2 s). The feed notices within
   * wal_sender_timeout plus its replication timeout, and resumes losing nothing; the slot's
   * confirmed position stays at or below the checkpoint throughout.
   */
  @Test
  void aReplicationConnectionWhoseStatusUpdatesAreHeldIsReopenedOnceTheServerEndsIt() throws Exception {
    rig = new ReplicationFaultRig(proxies, "pgupheld");
    rig.start();
    rig.writeAndSampleFor(Duration.ofMillis(500));
    Integer walsender = rig.walsender();
    long accepted = rig.proxy.connectionsAccepted();

    long faultStart = System.nanoTime();
    // Longer than the bound below, so that only the feed's own check can meet it.
    rig.proxy.oneWay(FaultProxy.Direction.DOWNSTREAM, Duration.ofMillis(6_500));
    rig.writeAndSampleFor(Duration.ofSeconds(3));
    await().atMost(Duration.ofSeconds(5)).until(() -> rig.firstFailureSince(faultStart) != null);
    long detectedMillis = TimeUnit.NANOSECONDS.toMillis(rig.firstFailureSince(faultStart).atNanos() - faultStart);
    System.out.printf("status updates held: noticed after %d ms (wal_sender_timeout 2000 ms + replicationTimeout"
        + " %d ms)%n", detectedMillis, REPLICATION_TIMEOUT.toMillis());
    assertThat(detectedMillis).as("noticed within wal_sender_timeout, the replication timeout and a read")
        .isLessThanOrEqualTo(2_000 + REPLICATION_TIMEOUT.toMillis() + 1_000);
    assertThat(rig.alive(walsender)).as("the server ended the walsender that heard nothing").isFalse();

    rig.writeAndSampleFor(Duration.ofSeconds(1));
    rig.awaitAllDelivered(Duration.ofSeconds(15));
    rig.sample();

    assertThat(rig.proxy.connectionsAccepted()).as("reconnected through the proxy").isGreaterThan(accepted);
    rig.assertNothingLostAndOrderKept();
    assertThat(rig.confirmedPastCheckpoint).as("slot confirmed past the checkpoint (%d samples)", rig.samples)
        .isEmpty();
  }

  /**
   * A cursor whose replication connection is blackholed closes within 2 s (the bound of ending
   * the stream), not pgjdbc's read timeout of a replication connection, its status interval (10 s
   * by default, used here): the server's reply to the end of the stream never comes. A listener
   * closed then hands its partition over within its bound too.
   */
  @Test
  void closingWhileTheReplicationConnectionIsBlackholedCompletesWithinItsBound() throws Exception {
    rig = new ReplicationFaultRig(proxies, "pgblackclose");
    PostgresChangeFeed defaults = PostgresChangeFeed.builder(EmbeddedPostgresServer.shared().jdbcUrl(rig.db),
        EmbeddedPostgresServer.USER, null, "pub").table("public.kv").replicationUrl(rig.replicationUrl).build();
    FeedCursor<Map<String, Object>> cursor = defaults.open(PartitionSpec.single(), StartPoint.latest());
    ListenerOnPostgresTest.sql(rig.ds, "INSERT INTO kv VALUES (100, 1)");
    await().atMost(Duration.ofSeconds(10)).until(() -> !cursor.poll(Duration.ofMillis(100)).isEmpty());
    assertThat(rig.proxy.connectionsAccepted()).as("the cursor streams through the proxy").isPositive();

    rig.proxy.blackhole(Duration.ofSeconds(20));
    assertThat(closeWithin(cursor::close, Duration.ofSeconds(3)))
        .as("cursor closed within 2 s and a margin while blackholed").isTrue();
    rig.proxy.pass();

    rig.start();
    rig.proxy.blackhole(Duration.ofSeconds(20));
    long started = System.nanoTime();
    rig.listener.close();
    long closedMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);
    System.out.printf("listener closed in %d ms while its replication connection was blackholed%n", closedMillis);
    assertThat(closedMillis).as("listener closed within its lease").isLessThan(ReplicationFaultRig.LEASE.toMillis());
  }

  /** Runs {@code close} on a thread of its own: whether it returned within {@code bound}. */
  private static boolean closeWithin(Runnable close, Duration bound) throws InterruptedException {
    CountDownLatch done = new CountDownLatch(1);
    long started = System.nanoTime();
    Thread t = new Thread(() -> {
      close.run();
      done.countDown();
    }, "closing-cursor");
    t.setDaemon(true);
    t.start();
    boolean within = done.await(bound.toMillis(), TimeUnit.MILLISECONDS);
    System.out.printf("cursor close took %d ms%s%n", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started),
        within ? "" : " (still running)");
    return within;
  }
}
