package dev.sluice.listener.internal;

import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseLostException;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;
import java.util.NavigableSet;
import java.util.concurrent.ConcurrentSkipListSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fair-share partition assignment: every listener instance of a stream holds a membership lease
 * ({@code stream@member:owner}) in the same store; an instance takes at most
 * ceil(partitions / live members) partitions and hands back the excess when members join. See
 * docs/adr/0006-partition-assignment.md.
 */
final class Assignment {
  private static final Logger log = LoggerFactory.getLogger(Assignment.class);

  private final LeaseStore store;
  private final String memberPrefix;
  private final String memberName;
  private final String owner;
  private final int partitions;
  private final Duration duration;
  private final NavigableSet<Integer> held = new ConcurrentSkipListSet<>();
  private volatile int fairShare;
  private volatile Lease membership;

  Assignment(LeaseStore store, String memberPrefix, String owner, int partitions, Duration duration) {
    this.store = store;
    this.memberPrefix = memberPrefix;
    this.memberName = memberPrefix + owner;
    this.owner = owner;
    this.partitions = partitions;
    this.duration = duration;
    this.fairShare = partitions; // until the first refresh, as if alone
  }

  /** Renews the membership and recomputes the fair share; runs on the renewal scheduler. */
  void refresh() {
    if (partitions == 1) {
      return; // nothing to balance
    }
    try {
      Lease m = membership;
      if (m == null) {
        membership = store.tryAcquire(memberName, owner, duration).orElse(null);
      } else {
        try {
          membership = store.renew(m, duration);
        } catch (LeaseLostException e) {
          membership = store.tryAcquire(memberName, owner, duration).orElse(null);
        }
      }
      long members = store.list(memberPrefix).stream().filter(LeaseRecord::isHeld).count();
      int share = (int) Math.ceil(partitions / (double) Math.max(1, members));
      if (share != fairShare) {
        log.info("Listener {}: {} live member(s), fair share {} of {} partitions", owner, members, share, partitions);
      }
      fairShare = share;
    } catch (RuntimeException e) {
      log.warn("Membership refresh for {} failed; keeping fair share {}: {}", owner, fairShare, e.toString());
    }
  }

  /** Reserves a slot before trying to acquire {@code partition}; false if at the fair share. */
  synchronized boolean mayAcquire(int partition) {
    return held.contains(partition) || held.size() < fairShare;
  }

  void acquired(int partition) {
    held.add(partition);
  }

  void released(int partition) {
    held.remove(partition);
  }

  /** Whether this instance holds more than its share and {@code partition} is one to hand back. */
  boolean shouldHandBack(int partition) {
    int excess = held.size() - fairShare;
    if (excess <= 0) {
      return false;
    }
    // Hand back the highest-numbered partitions: deterministic, so two workers do not both leave.
    return held.descendingSet().stream().limit(excess).anyMatch(p -> p == partition);
  }

  void leave() {
    Lease m = membership;
    if (m != null) {
      try {
        store.release(m);
      } catch (RuntimeException e) {
        log.debug("Releasing membership {} failed: {}", memberName, e.toString());
      }
    }
  }
}
