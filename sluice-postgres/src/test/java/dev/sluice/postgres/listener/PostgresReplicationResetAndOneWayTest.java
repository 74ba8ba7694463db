package dev.sluice.postgres.listener;

import static dev.sluice.postgres.listener.ReplicationFaultRig.REPLICATION_TIMEOUT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.testkit.net.FaultProxies;
import dev.sluice.testkit.net.FaultProxy;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 34 items 2.2, 2.3 and 2.5: the PostgreSQL feed's replication connection reset, and held
 * one way (the server's messages held, the feed's status updates passing), while its catalog
 * connections, the lease store and the writes reach the server directly ({@link
 * ReplicationFaultRig}): the feed notices, reconnects and resumes losing nothing, in per-key order,
 * and the slot never confirms past the committed checkpoint.
 */
class PostgresReplicationResetAndOneWayTest {
  @RegisterExtension final FaultProxies proxies = new FaultProxies();
  private ReplicationFaultRig rig;

  @AfterEach
  void cleanUp() {
    if (rig != null) {
      rig.close();
    }
  }

  /** A reset is noticed at the next read; the listener reconnects at once, taking the slot over. */
  @Test
  void aResetReplicationConnectionIsReopenedAtTheCheckpointLosingNothing() throws Exception {
    rig = new ReplicationFaultRig(proxies, "pgreset");
    rig.start();
    long accepted = rig.proxy.connectionsAccepted();
    for (int round = 0; round < 3; round++) {
      rig.writeAndSampleFor(Duration.ofMillis(400));
      long reset = System.nanoTime();
      rig.proxy.resetConnections();
      rig.writeAndSampleFor(Duration.ofMillis(300));
      await().atMost(Duration.ofSeconds(5)).until(() -> rig.firstFailureSince(reset) != null);
      long noticedMillis = TimeUnit.NANOSECONDS.toMillis(rig.firstFailureSince(reset).atNanos() - reset);
      System.out.printf("reset %d noticed after %d ms%n", round, noticedMillis);
      assertThat(noticedMillis).as("a reset is noticed at the next read").isLessThan(REPLICATION_TIMEOUT.toMillis());
    }
    rig.writeAndSampleFor(Duration.ofMillis(500));
    rig.awaitAllDelivered(Duration.ofSeconds(15));
    rig.sample();

    assertThat(rig.proxy.connectionsAccepted()).as("reconnected through the proxy after each reset")
        .isGreaterThanOrEqualTo(accepted + 3);
    rig.assertNothingLostAndOrderKept();
    assertThat(rig.confirmedPastCheckpoint).as("slot confirmed past the checkpoint (%d samples)", rig.samples)
        .isEmpty();
  }

  /**
   * The server's messages held (a one-way partition): the feed's status updates reach the server,
   * which therefore keeps the walsender, but its replies and changes never arrive. The feed
   * notices within its replication timeout, which the server's own wal_sender_timeout could not.
   */
  @Test
  void aReplicationConnectionWhoseServerMessagesAreHeldIsGivenUpWithinTheReplicationTimeout() throws Exception {
    rig = new ReplicationFaultRig(proxies, "pgoneway");
    rig.start();
    rig.writeAndSampleFor(Duration.ofMillis(500));
    long accepted = rig.proxy.connectionsAccepted();

    long faultStart = System.nanoTime();
    rig.proxy.oneWay(FaultProxy.Direction.UPSTREAM, Duration.ofSeconds(4));
    rig.writeAndSampleFor(Duration.ofMillis(3_000));
    ReplicationFaultRig.Failure detected = rig.firstFailureSince(faultStart);
    assertThat(detected).as("the listener was told the replication connection failed").isNotNull();
    long detectedMillis = TimeUnit.NANOSECONDS.toMillis(detected.atNanos() - faultStart);
    System.out.printf("one-way fault noticed after %d ms (replicationTimeout %d ms)%n", detectedMillis,
        REPLICATION_TIMEOUT.toMillis());
    assertThat(detectedMillis).as("noticed within the replication timeout and a read")
        .isLessThanOrEqualTo(REPLICATION_TIMEOUT.toMillis() + 1_000);
    assertThat(detected.error()).hasMessageContaining("nothing arrived on the replication connection");

    rig.writeAndSampleFor(Duration.ofSeconds(2)); // the fault ends in the meantime
    rig.awaitAllDelivered(Duration.ofSeconds(15));
    rig.sample();

    assertThat(rig.proxy.connectionsAccepted()).as("reconnected through the proxy").isGreaterThan(accepted);
    rig.assertNothingLostAndOrderKept();
    assertThat(rig.confirmedPastCheckpoint).as("slot confirmed past the checkpoint (%d samples)", rig.samples)
        .isEmpty();
  }
}
