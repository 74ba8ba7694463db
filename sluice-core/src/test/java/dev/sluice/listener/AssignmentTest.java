package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.LeaseStoreException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Balanced assignment across members of one group (docs/adr/0008-balanced-assignment.md): every
 * member ends with floor(N/M) or ceil(N/M) partitions, a paused or flapping member does not pull
 * partitions back and forth, a partition a member cannot run is taken by a peer, and membership
 * records do not pile up. Members' labels sort a < b < c < d, so the extra partitions of N mod M
 * go to the first labels.
 */
class AssignmentTest {
  private static final Duration LEASE = Duration.ofSeconds(1);
  private static final String GROUP = "assign-group";

  private final InMemoryLeaseStore memory = new InMemoryLeaseStore(Clock.systemUTC());
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  private final List<Listener<String>> listeners = new ArrayList<>();
  private final Map<String, AtomicInteger> acquisitions = new ConcurrentHashMap<>();
  private final Set<String> received = ConcurrentHashMap.newKeySet();

  @AfterEach
  void closeAll() {
    listeners.forEach(Listener::close);
  }

  private Listener<String> start(String label, int partitions, LeaseStore store) {
    Listener<String> l = Listener.builder(feed, store).group(GROUP).owner(label)
        .partitions(partitions)
        .handler((e, f) -> received.add(e.document()))
        .checkpoint(CheckpointPolicy.everyChange())
        .leaseDuration(LEASE)
        .renewInterval(Duration.ofMillis(300))
        .acquireInterval(Duration.ofMillis(50))
        .pollWait(Duration.ofMillis(20))
        .observer(new ListenerObserver() {
          @Override
          public void acquired(Lease lease) {
            acquisitions.computeIfAbsent(label, k -> new AtomicInteger()).incrementAndGet();
          }
        })
        .build();
    listeners.add(l);
    return l.start();
  }

  private Listener<String> start(String label, int partitions) {
    return start(label, partitions, memory);
  }

  private static int active(Listener<String> l) {
    return (int) l.status().stream().filter(s -> s.state() == PartitionState.ACTIVE).count();
  }

  private int totalAcquisitions() {
    return acquisitions.values().stream().mapToInt(AtomicInteger::get).sum();
  }

  private boolean allHeld(int partitions) {
    return memory.list(GROUP + "/orders#").stream()
        .filter(r -> r.name().endsWith("of" + partitions) && r.isHeld()).count() == partitions;
  }

  @Test
  void fourPartitionsOnThreeMembersStartedOneAfterAnotherEndTwoOneOne() {
    Listener<String> a = start("a", 4);
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 4);
    Listener<String> b = start("b", 4);
    await().atMost(Duration.ofSeconds(15)).until(() -> active(a) == 2 && active(b) == 2);
    Listener<String> c = start("c", 4);
    await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(20))
        .until(() -> active(a) == 2 && active(b) == 1 && active(c) == 1 && allHeld(4));

    for (int i = 0; i < 40; i++) {
      feed.append("k" + i, "v" + i);
    }
    await().atMost(Duration.ofSeconds(10)).until(() -> received.size() == 40);
  }

  @Test
  void sixPartitionsOnFourMembersEndTwoTwoOneOne() {
    List<Listener<String>> members = new ArrayList<>();
    int[][] expected = {{6}, {3, 3}, {2, 2, 2}, {2, 2, 1, 1}};
    for (int m = 0; m < 4; m++) {
      members.add(start(String.valueOf((char) ('a' + m)), 6));
      int[] shares = expected[m];
      await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(20)).until(() -> {
        for (int i = 0; i < shares.length; i++) {
          if (active(members.get(i)) != shares[i]) {
            return false;
          }
        }
        return allHeld(6);
      });
    }
  }

  @Test
  void aMemberPausedPastItsLeaseDoesNotCountPartitionsItLost() {
    Listener<String> a = start("a", 4);
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 4);
    Listener<String> b = start("b", 4);
    FaultyLeaseStore cStore = new FaultyLeaseStore(memory);
    Listener<String> c = start("c", 4, cStore);
    await().atMost(Duration.ofSeconds(20))
        .until(() -> active(a) == 2 && active(b) == 1 && active(c) == 1 && allHeld(4));
    String cMember = c.config().memberPrefix() + c.owner();
    long epochBefore = memory.read(cMember).orElseThrow().epoch();

    UnheldWatch watch = new UnheldWatch(4);
    watch.start();
    cStore.freeze(); // c stops reaching the store, as if paused by SIGSTOP
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) + active(b) == 4 && allHeld(4));
    await().atMost(Duration.ofSeconds(5)).until(() -> !memory.read(cMember).orElseThrow().isHeld());
    cStore.thaw();

    // c joins again as a new member (its old membership is not renewed past its deadline), counts
    // nothing it lost, and the group ends balanced without a partition left unowned on the way.
    await().atMost(Duration.ofSeconds(10)).until(() -> memory.read(cMember)
        .filter(LeaseRecord::isHeld).map(r -> r.epoch() > epochBefore).orElse(false));
    await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(20))
        .until(() -> active(a) == 2 && active(b) == 1 && active(c) == 1 && allHeld(4));
    watch.stop();
    assertThat(watch.longestUnheldMillis())
        .as("longest time any partition had no holder, from the pause to the end (ms)")
        .isLessThan(3 * LEASE.toMillis());
  }

  @Test
  void aFlappingMemberCausesAtMostTwoHandOvers() throws InterruptedException {
    Listener<String> a = start("a", 4);
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 4);
    Listener<String> b = start("b", 4);
    FaultyLeaseStore cStore = new FaultyLeaseStore(memory);
    Listener<String> c = start("c", 4, cStore);
    await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(20))
        .until(() -> active(a) == 2 && active(b) == 1 && active(c) == 1 && allHeld(4));
    int before = totalAcquisitions();

    // The workload: c is cut off past its lease, back for a while, cut off again, for 15 s. The
    // sleeps shape the fault pattern; no assertion waits on them.
    long end = System.nanoTime() + Duration.ofSeconds(15).toNanos();
    while (System.nanoTime() < end) {
      cStore.freeze();
      Thread.sleep(LEASE.toMillis() * 3 / 2);
      cStore.thaw();
      Thread.sleep(LEASE.toMillis() * 3 / 2);
    }

    assertThat(totalAcquisitions() - before)
        .as("partitions that changed hands while c flapped for 15 s")
        .isBetween(1, 2);
    assertThat(allHeld(4)).isTrue();
  }

  @Test
  void aPartitionAMemberCannotRunIsTakenByAPeerWithinALeaseDuration() {
    Listener<String> a = start("a", 4);
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 4);
    FaultyLeaseStore bStore = new FaultyLeaseStore(memory);
    bStore.failCommits(new LeaseStoreException("not authorized to execute command update", false,
        null), 1);
    Listener<String> b = start("b", 4, bStore);
    await().atMost(Duration.ofSeconds(15)).until(() -> active(a) == 2 && active(b) == 2);

    for (int i = 0; i < 40; i++) {
      feed.append("k" + i, "v" + i);
    }
    await().atMost(Duration.ofSeconds(10))
        .until(() -> b.status().stream().anyMatch(s -> s.state() == PartitionState.FAILED));
    long failedAt = System.nanoTime();
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 3);
    long takenAfterMillis = (System.nanoTime() - failedAt) / 1_000_000;
    assertThat(takenAfterMillis).as("time for a peer to take the failed partition (ms)")
        .isLessThan(LEASE.toMillis() + 2 * 300 + 1_000);
    await().atMost(Duration.ofSeconds(10)).until(() -> received.size() == 40);
    assertThat(active(b)).isEqualTo(1);
  }

  @Test
  void aMemberThatCameTooLateForAPartitionAPeerAdoptedGetsItBackWithoutAMembershipChange() {
    Listener<String> a = start("a", 4);
    await().atMost(Duration.ofSeconds(10)).until(() -> active(a) == 4);
    Listener<String> b = start("b", 4);
    await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(15))
        .until(() -> active(a) == 2 && active(b) == 2 && allHeld(4));
    int before = totalAcquisitions();

    // c joins, but the store refuses its partition acquisitions: the partition b hands back to it
    // stays unheld for a lease, and a peer adopts it. c's membership never lapses meanwhile.
    FaultyLeaseStore cStore = new FaultyLeaseStore(memory);
    cStore.failPartitionAcquisitions(new LeaseStoreException("store overloaded", true, null), Integer.MAX_VALUE);
    Listener<String> c = start("c", 4, cStore);
    await().atMost(Duration.ofSeconds(20))
        .until(() -> totalAcquisitions() > before && active(a) + active(b) == 4 && allHeld(4));
    assertThat(active(c)).isZero();

    // c can acquire again: the adopter hands the partition back once, and c takes it.
    cStore.failPartitionAcquisitions(null, 0);
    await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(20))
        .until(() -> active(a) == 2 && active(b) == 1 && active(c) == 1 && allHeld(4));
  }

  @Test
  void aDeadMembersRecordIsRemovedAndAClosedMemberLeavesNone() {
    String prefix = GROUP + "/orders@member:";
    memory.tryAcquire(prefix + "ghost/1@host/x#1", "ghost/1@host/x#1", LEASE).orElseThrow();
    for (int i = 0; i < 3; i++) {
      Listener<String> gone = start("gone" + i, 2);
      await().atMost(Duration.ofSeconds(5)).until(() -> active(gone) == 2);
      gone.close();
    }
    Listener<String> a = start("a", 2);
    await().atMost(Duration.ofSeconds(15))
        .until(() -> memory.list(prefix).stream().map(LeaseRecord::name).toList(),
            names -> names.equals(List.of(prefix + a.owner())));
  }

  /** Samples the partition records and keeps the longest time any partition had no holder. */
  private final class UnheldWatch {
    private final int partitions;
    private final AtomicBoolean running = new AtomicBoolean(true);
    private final Map<String, Long> unheldSince = new HashMap<>();
    private volatile long longestNanos;
    private Thread thread;

    UnheldWatch(int partitions) {
      this.partitions = partitions;
    }

    void start() {
      thread = new Thread(() -> {
        while (running.get()) {
          long now = System.nanoTime();
          for (int i = 0; i < partitions; i++) {
            String name = GROUP + "/orders#" + i + "of" + partitions;
            boolean held = memory.read(name).map(LeaseRecord::isHeld).orElse(false);
            if (held) {
              unheldSince.remove(name);
            } else {
              long since = unheldSince.computeIfAbsent(name, k -> now);
              longestNanos = Math.max(longestNanos, now - since);
            }
          }
          java.util.concurrent.locks.LockSupport.parkNanos(5_000_000); // sampling period
        }
      }, "unheld-watch");
      thread.setDaemon(true);
      thread.start();
    }

    void stop() {
      running.set(false);
      try {
        thread.join(5_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    long longestUnheldMillis() {
      return longestNanos / 1_000_000;
    }
  }
}
