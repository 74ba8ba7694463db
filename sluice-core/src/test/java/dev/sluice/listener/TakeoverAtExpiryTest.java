package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A standby takes a dead holder's partition just past its lease's expiry on the store's clock, not
 * an acquire interval (here 10 s) later, also when the partition is one of several and the dead
 * holder was a counted member of the group (issue 36 target 4, ADR 0119); and waking at a live
 * holder's expiry never takes its lease. The dead holder is records acquired and never renewed, as
 * a SIGKILLed process leaves them; its expiries are read from the store, and the standby's grant
 * is stamped by it, so the figure is on the store's clock alone.
 */
class TakeoverAtExpiryTest {
  private static final Duration LEASE = Duration.ofMillis(1500);
  private static final Duration ACQUIRE_INTERVAL = Duration.ofSeconds(10);
  private static final String GROUP = "expiry-group";

  private final InMemoryLeaseStore memory = new InMemoryLeaseStore(Clock.systemUTC());
  private final InMemoryFeed feed = new InMemoryFeed("orders");
  /** Each partition's grants to a listener of this test (lease name to grant stamps, store clock). */
  private final Map<String, List<Instant>> granted = new ConcurrentHashMap<>();
  private Listener<String> standby;
  private Listener<String> holder;

  @AfterEach
  void close() {
    if (standby != null) {
      standby.close();
    }
    if (holder != null) {
      holder.close();
    }
  }

  private Listener<String> listener(String label, int partitions, LeaseStore store) {
    return Listener.builder(feed, store).group(GROUP).owner(label)
        .partitions(partitions)
        .handler((e, f) -> { })
        .leaseDuration(LEASE)
        .renewInterval(Duration.ofMillis(500))
        .acquireInterval(ACQUIRE_INTERVAL)
        .pollWait(Duration.ofMillis(20))
        .observer(new ListenerObserver() {
          @Override
          public void acquired(Lease lease) {
            granted.computeIfAbsent(lease.name(), k -> new java.util.concurrent.CopyOnWriteArrayList<>())
                .add(lease.expiresAt().minus(LEASE));
          }
        })
        .build();
  }

  @Test
  void aDeadMembersPartitionIsTakenJustPastItsExpiryNotAnAcquireIntervalLater() {
    standby = listener("standby", 2, memory);
    String dead = "dead/1@host/x#1";
    // The dead member is counted (it was there when the standby started): the standby's quota is 1.
    memory.tryAcquire(standby.config().memberPrefix() + dead, dead, Duration.ofSeconds(3)).orElseThrow();
    standby.start();
    await().atMost(Duration.ofSeconds(10)).until(() -> active(standby) == 1);
    int other = standby.status().get(0).state() == PartitionState.ACTIVE ? 1 : 0;
    String name = standby.config().leaseName(other);
    // The dead member took the other partition and died; the standby's worker for it was refused
    // for want of room under its quota and waits its acquire interval (5-10 s).
    Lease deadLease = memory.tryAcquire(name, dead, Duration.ofSeconds(3)).orElseThrow();

    await().atMost(Duration.ofSeconds(15)).until(() -> active(standby) == 2);

    Duration past = Duration.between(deadLease.expiresAt(), granted.get(name).get(0));
    // Counted out at its membership's expiry, the partition tried then and again at its own
    // expiry: a few ms past it. Before, the attempt came at the end of the acquire interval,
    // at least 2 s past it.
    assertThat(past).as("grant of %s after the dead holder's expiry (store clock)", name)
        .isBetween(Duration.ZERO, Duration.ofMillis(1000));
    assertThat(memory.read(name).orElseThrow().epoch()).isGreaterThan(deadLease.epoch());
  }

  @Test
  void aDeadMembersPartitionIsTakenAtItsExpiryAlsoWhenItsMembershipWasRenewedAfterIt() {
    // As a SIGKILL between the renewal of a member's membership and that of its partitions leaves
    // them: the membership expires up to a renew interval after the partition (here 1.4 s, with
    // lease 4.5 s and renewals every 1.5 s). The member has not renewed its membership since the
    // partition ran out, so it is counted out then, not at its membership's expiry.
    Duration lease = Duration.ofMillis(4500);
    standby = Listener.builder(feed, memory).group(GROUP).owner("standby").partitions(2)
        .handler((e, f) -> { })
        .leaseDuration(lease)
        .renewInterval(Duration.ofMillis(1500))
        .acquireInterval(ACQUIRE_INTERVAL)
        .pollWait(Duration.ofMillis(20))
        .observer(new ListenerObserver() {
          @Override
          public void acquired(Lease l) {
            granted.computeIfAbsent(l.name(), k -> new java.util.concurrent.CopyOnWriteArrayList<>())
                .add(l.expiresAt().minus(lease));
          }
        })
        .build();
    String dead = "dead/2@host/y#1";
    Lease membership = memory.tryAcquire(standby.config().memberPrefix() + dead, dead, lease).orElseThrow();
    standby.start();
    await().atMost(Duration.ofSeconds(10)).until(() -> active(standby) == 1);
    int other = standby.status().get(0).state() == PartitionState.ACTIVE ? 1 : 0;
    String name = standby.config().leaseName(other);
    Duration untilGap = Duration.between(memory.now(), membership.expiresAt().minusMillis(1400));
    Lease deadLease = memory.tryAcquire(name, dead, untilGap).orElseThrow();

    await().atMost(Duration.ofSeconds(20)).until(() -> active(standby) == 2);

    Duration past = Duration.between(deadLease.expiresAt(), granted.get(name).get(0));
    // Before, at the membership's expiry at the earliest: 1.4 s past the partition's.
    assertThat(past).as("grant of %s after the dead holder's expiry (store clock)", name)
        .isBetween(Duration.ZERO, Duration.ofMillis(700));
  }

  @Test
  void wakingAtALiveHoldersExpiryNeverTakesItsLease() {
    holder = listener("holder", 1, memory).start();
    await().atMost(Duration.ofSeconds(10)).until(() -> active(holder) == 1);
    String name = holder.config().leaseName(0);
    long epoch = memory.read(name).orElseThrow().epoch();
    AtomicInteger attempts = new AtomicInteger();
    standby = listener("standby", 1, counting(memory, attempts)).start();

    // For six leases the standby wakes at each expiry it read, finds the lease renewed meanwhile
    // and is refused by the store: the holder keeps it, with the same epoch, all along.
    await().during(LEASE.multipliedBy(6)).atMost(LEASE.multipliedBy(8))
        .until(() -> active(holder) == 1 && memory.read(name).map(LeaseRecord::epoch).orElse(-1L) == epoch);
    assertThat(active(standby)).isZero();
    assertThat(granted.get(name)).as("grants of %s", name).hasSize(1);
    // It did wake early: an acquire interval of 10 s allows two attempts in 9 s, at the most.
    assertThat(attempts.get()).as("the standby's attempts in six leases").isGreaterThanOrEqualTo(4);
  }

  private static int active(Listener<String> l) {
    return (int) l.status().stream().filter(s -> s.state() == PartitionState.ACTIVE).count();
  }

  /** {@code store}, counting the calls of tryAcquire for partitions (not the membership's). */
  private static LeaseStore counting(LeaseStore store, AtomicInteger attempts) {
    return (LeaseStore) Proxy.newProxyInstance(LeaseStore.class.getClassLoader(),
        new Class<?>[] {LeaseStore.class}, (proxy, method, args) -> {
          if (method.getName().equals("tryAcquire") && ((String) args[0]).contains("#")) {
            attempts.incrementAndGet();
          }
          try {
            return method.invoke(store, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
        });
  }
}
