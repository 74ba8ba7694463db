package dev.sluice.listener.internal;

import dev.sluice.Ticker;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.internal.LeaseKeeper;
import dev.sluice.listener.ListenerConfig;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableSet;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.IntPredicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Balanced partition assignment (docs/adr/0008-balanced-assignment.md). Every listener instance
 * of a group and stream holds a membership lease ({@code group/stream@member:<owner>}), kept by a
 * {@link LeaseKeeper} like any other lease, so a process paused past its lease never counts
 * itself live again with its old membership. On every refresh (once per renew interval) it reads
 * the live membership and computes its quota with {@link Balance}: floor(N/M) or ceil(N/M), the
 * same figures on every member. An instance takes a partition only while under its quota, hands
 * back its excess only after seeing it on two refreshes in a row, and:
 *
 * <ul>
 *   <li>counts a peer only once that peer's membership has lasted a settling time, which grows
 *       with every time the peer was seen to lose and regain its membership (a flapping member
 *       stops pulling partitions back and forth);
 *   <li>may adopt, beyond its quota, a partition that nobody has held for a whole lease duration
 *       (its member failed it, or cannot run it), and keeps it until the membership changes, except
 *       that it hands it back once while every partition is held and a counted peer is under its
 *       quota (a member that had room but came too late for it would otherwise stay under its
 *       quota for good);
 *   <li>deletes membership records that expired long ago, so they do not pile up;
 *   <li>counts a peer out as soon as one of its partition leases ran out without a release and it
 *       has not renewed its membership since; refreshes again just past the first expiry of a
 *       counted peer's leases when that comes before the next refresh; and, whenever a refresh
 *       leaves room under the quota, wakes the workers refused for want of it, and the idle
 *       workers of partitions released since the last refresh (ADR 0119, 0131): a dead member's
 *       partitions are tried at their expiry, and a released one at the next refresh even without
 *       a release notice, not a refresh and an acquire interval or the former holder's expiry later.
 * </ul>
 */
final class Assignment {
  private static final Logger log = LoggerFactory.getLogger(Assignment.class);
  /**
   * Refreshes in a row that must show an excess, or a peer under its quota, before a partition is
   * handed back.
   */
  private static final int CONFIRMATIONS = 2;
  /** Settling time multiplier per flap seen. */
  private static final int FLAP_FACTOR = 4;

  private final ListenerConfig<?> config;
  private final LeaseStore store;
  private final String memberPrefix;
  private final String memberName;
  private final String owner;
  private final int partitions;
  private final Duration duration;
  private final ScheduledExecutorService scheduler;
  private final Ticker ticker;
  private final long baseSettleNanos;
  private final long maxSettleNanos;
  private final long flapMemoryNanos;
  private final long deadRecordAgeNanos;

  private final NavigableSet<Integer> held = new ConcurrentSkipListSet<>();
  /** Partitions taken beyond the quota as orphans, with the membership they were adopted under. */
  private final Map<Integer, List<String>> adopted = new HashMap<>();
  /**
   * Adopted partitions handed back once to a counted peer under its quota, with the membership
   * they were handed back under: adopted again under that membership, they are kept.
   */
  private final Map<Integer, List<String>> returnedAdoptions = new HashMap<>();
  private final Map<String, Peer> peers = new HashMap<>();
  private final Map<Integer, Long> unheldSince = new HashMap<>();
  /** This layout's partition lease names, to their index. */
  private final Map<String, Integer> partitionIndex = new HashMap<>();
  /** Partitions being acquired within the quota, or as orphans (see {@link #reserve}). */
  private final java.util.Set<Integer> reservedUnderQuota = new java.util.HashSet<>();
  private final java.util.Set<Integer> reservedAsOrphan = new java.util.HashSet<>();
  private volatile int quota;
  /** How many partitions beyond the quota to hand back (ADR 0008). */
  private final Confirmed excess = new Confirmed();
  /** How many adoptions to hand back to peers under their quotas (ADR 0131). */
  private final Confirmed wanted = new Confirmed();
  private volatile List<String> counted = List.of();
  private boolean firstRefresh = true;
  private volatile LeaseKeeper membership;
  /** Wakes the workers refused for want of room; set by the engine once its workers exist. */
  private volatile Consumer<Room> roomAppeared = room -> { };
  /** The partitions some member held at the last refresh: those unheld now were released since. */
  private volatile Set<Integer> heldAtLastRefresh = Set.of();
  /** The extra refresh due at a peer's membership expiry, and when (ticker nanos); scheduler thread. */
  private ScheduledFuture<?> expiryRefresh;
  private long expiryRefreshAt;

  /** What this member remembers of a peer's membership record. */
  private static final class Peer {
    long epoch;
    long sinceNanos;
    int flaps;
    long lastFlapNanos;
    long lastSeenNanos;

    Peer(long epoch, long sinceNanos) {
      this.epoch = epoch;
      this.sinceNanos = sinceNanos;
      this.lastSeenNanos = sinceNanos;
    }
  }

  Assignment(ListenerConfig<?> config, ScheduledExecutorService scheduler, Ticker ticker) {
    this.config = config;
    this.store = config.leaseStore();
    this.memberPrefix = config.memberPrefix();
    this.owner = config.owner();
    this.memberName = memberPrefix + owner;
    this.partitions = config.partitions();
    this.duration = config.leaseDuration();
    this.scheduler = scheduler;
    this.ticker = ticker;
    this.baseSettleNanos = config.renewInterval().toNanos() * 2;
    this.maxSettleNanos = duration.toNanos() * 10;
    this.flapMemoryNanos = duration.toNanos() * 20;
    this.deadRecordAgeNanos = duration.toNanos() * 3;
    this.quota = partitions; // until the first refresh, as if alone
    for (int i = 0; i < partitions; i++) {
      partitionIndex.put(config.leaseName(i), i);
    }
  }

  /**
   * Renews the membership, reads the live members and recomputes the quota. Runs on the scheduler
   * (one thread); the store is read outside the lock so workers never wait on a slow store here.
   */
  void refresh() {
    if (partitions == 1) {
      return; // nothing to balance
    }
    if (leaving) {
      return; // a refresh due after leave() would join the group again, for a lease, as a ghost
    }
    try {
      keepMembership();
      long now = ticker.nanos();
      List<LeaseRecord> countedPeers = new ArrayList<>();
      for (LeaseRecord r : store.list(memberPrefix)) {
        if (r.name().equals(memberName)) {
          continue;
        }
        if (r.isHeld()) {
          if (observe(r, now)) {
            countedPeers.add(r);
          }
        } else if (expiredFor(r) > deadRecordAgeNanos) {
          deleteDeadRecord(r);
        }
      }
      peers.values().removeIf(p -> now - p.lastSeenNanos > flapMemoryNanos);
      firstRefresh = false;
      PartitionRecords partitionRecords = partitionRecords();
      Map<Integer, String> holders = partitionRecords.holders;
      List<String> live = new ArrayList<>();
      Duration firstExpiry = null;
      for (LeaseRecord m : countedPeers) {
        String peer = m.name().substring(memberPrefix.length());
        Instant lapsed = partitionRecords.lastLapse.get(peer);
        // Its membership last renewed at its expiry minus the lease (the group's, assumed the same
        // for every member); a partition lease of its that ran out since then says it stopped.
        if (lapsed != null && !lapsed.isBefore(m.expiresAt().minus(duration))) {
          log.info("Listener {}: member {} counted out before its membership expires ({}): its lease on a"
              + " partition ran out at {} and it has not renewed its membership since", owner, peer,
              m.expiresAt(), lapsed);
          continue;
        }
        live.add(m.name());
        firstExpiry = earlier(firstExpiry, Duration.between(m.storeTime(), m.expiresAt()));
        firstExpiry = earlier(firstExpiry, partitionRecords.firstExpiry.get(peer));
      }
      live.add(memberName);
      live.sort(null);
      update(List.copyOf(live), holders, now);
      refreshAtExpiry(firstExpiry, now);
      Set<Integer> heldBefore = heldAtLastRefresh;
      heldAtLastRefresh = Set.copyOf(holders.keySet());
      if (hasRoom()) {
        // Only the partitions no counted member holds: unheld, or held by a member counted out
        // (its lease has yet to expire: the attempt reads when, and the next one comes then).
        // Those a live peer holds would only be refused, all at once.
        Set<String> counting = Set.copyOf(live);
        roomAppeared.accept(new Room(p -> {
          String holder = holders.get(p);
          return holder == null || !counting.contains(memberPrefix + holder);
        }, p -> !holders.containsKey(p) && heldBefore.contains(p)));
      }
    } catch (RuntimeException e) {
      if (leaving || interrupted(e)) {
        // The listener is closing: its scheduler interrupted this refresh. Nothing failed.
        log.debug("Membership refresh for {} ended by the listener closing: {}", owner, e.toString());
      } else {
        log.warn("Membership refresh for {} failed; keeping quota {}: {}", owner, quota, e.toString());
      }
    }
  }

  /** Set when the listener leaves the group (it is closing). */
  private volatile boolean leaving;

  /** Whether {@code e} is this thread being interrupted (the store's client says so in its own words). */
  private static boolean interrupted(Throwable e) {
    if (Thread.currentThread().isInterrupted()) {
      return true;
    }
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof InterruptedException || t.getClass().getSimpleName().contains("Interrupted")) {
        return true;
      }
    }
    return false;
  }

  private synchronized void update(List<String> live, Map<Integer, String> holders, long now) {
    int q = Balance.quota(live, memberName, partitions);
    if (q != quota || !live.equals(counted)) {
      log.info("Listener {}: {} member(s) counted, quota {} of {} partitions (holds {})", owner,
          live.size(), q, partitions, held.size());
    }
    quota = q;
    counted = live;
    adopted.entrySet().removeIf(e -> !e.getValue().equals(live) || !held.contains(e.getKey()));
    returnedAdoptions.entrySet().removeIf(e -> !e.getValue().equals(live));
    excess.refresh(held.size() - adopted.size() - q);
    wanted.refresh(Math.min(underQuota(live, holders), returnableAdoptions().size()));
    Set<Integer> heldByAnyone = holders.keySet();
    for (int i = 0; i < partitions; i++) {
      if (heldByAnyone.contains(i) || held.contains(i)) {
        unheldSince.remove(i);
      } else {
        unheldSince.putIfAbsent(i, now);
      }
    }
  }

  /**
   * How many partitions the counted peers lack to reach their quotas while every partition is held
   * ({@code holders}: partition to owner, from the lease records): what an adopter keeps from them.
   * With a partition unheld, a peer under its quota takes that one instead.
   */
  private int underQuota(List<String> live, Map<Integer, String> holders) {
    if (holders.size() < partitions) {
      return 0;
    }
    Map<String, Integer> holds = new HashMap<>();
    holders.values().forEach(o -> holds.merge(memberPrefix + o, 1, Integer::sum));
    int lacking = 0;
    for (Map.Entry<String, Integer> e : Balance.quotas(live, partitions).entrySet()) {
      if (!e.getKey().equals(memberName)) {
        lacking += Math.max(0, e.getValue() - holds.getOrDefault(e.getKey(), 0));
      }
    }
    return lacking;
  }

  /** Adopted partitions not yet handed back once under the current membership, highest first. */
  private List<Integer> returnableAdoptions() {
    return adopted.keySet().stream().filter(p -> !returnedAdoptions.containsKey(p))
        .sorted(java.util.Comparator.reverseOrder()).toList();
  }

  /** How far past a peer's membership expiry the extra refresh comes (store round trips, clock steps). */
  static final Duration EXPIRY_MARGIN = PartitionWorker.EXPIRY_MARGIN;

  /**
   * Refreshes again just past the earliest expiry of a counted peer's membership or partition
   * leases ({@code left}, judged on the store's clock as a duration from the list, so the clocks
   * of two machines never meet), when that comes before the next regular refresh: a member that
   * died is counted out then and its partitions are tried at once. A peer that is alive renews
   * before then (renewals come every renew interval, at most a third of the lease), and that
   * refresh finds it live again: one list more. At most one such refresh is pending.
   */
  private void refreshAtExpiry(Duration left, long now) {
    if (left == null || leaving) {
      return;
    }
    // Spread like a worker's attempt past an expiry: every member of a large group times the
    // same expiry, and would otherwise list the store at one instant.
    long spread = ThreadLocalRandom.current().nextLong(PartitionWorker.EXPIRY_SPREAD.toNanos() + 1);
    Duration delay = (left.isNegative() ? Duration.ZERO : left).plus(EXPIRY_MARGIN).plusNanos(spread);
    if (delay.compareTo(config.renewInterval()) >= 0) {
      return; // the regular refresh comes first, and will look again
    }
    long at = now + delay.toNanos();
    synchronized (this) {
      if (expiryRefresh != null && expiryRefreshAt - now > 0 && expiryRefreshAt - at <= 0) {
        return; // one as early is still to come (not this one, which is running now)
      }
      if (expiryRefresh != null) {
        expiryRefresh.cancel(false);
      }
      try {
        expiryRefresh = scheduler.schedule(this::refresh, delay.toNanos(), TimeUnit.NANOSECONDS);
        expiryRefreshAt = at;
      } catch (RejectedExecutionException closing) {
        expiryRefresh = null; // the listener is closing
      }
    }
  }

  /**
   * What a refresh that leaves room under the quota found: the partitions worth an attempt now (no
   * member counted live holds them), and of those the ones nobody holds at all.
   *
   * @param worthTrying for the workers refused for want of room: unheld, or held by a member
   *     counted out (its lease has yet to expire: the attempt reads when, and the next one comes
   *     then)
   * @param unheld for every idle worker, also one waiting for its former holder's expiry: held at
   *     the last refresh and unheld now (a peer handed it back or stopped), so taken now, whether
   *     or not a release notice came. Only those: the workers of partitions unheld for longer
   *     already try at their own interval, and waking them all at once on every refresh (a
   *     thousand partitions starting) would crowd out the renewals
   */
  record Room(IntPredicate worthTrying, IntPredicate unheld) {}

  /** Sets what wakes the workers when a refresh leaves room under the quota. */
  void onRoom(Consumer<Room> wake) {
    this.roomAppeared = wake;
  }

  /** Whether a worker asking now would find a place under the quota. */
  synchronized boolean hasRoom() {
    return held.size() - adopted.size() + reservedUnderQuota.size() < quota;
  }

  private static long expiredFor(LeaseRecord r) {
    if (r.expiresAt() == null) {
      return Long.MAX_VALUE;
    }
    return Duration.between(r.expiresAt(), r.storeTime()).toNanos();
  }

  private void keepMembership() {
    LeaseKeeper m = membership;
    if (m != null && m.isValid()) {
      return;
    }
    long start = ticker.nanos();
    Optional<Lease> lease = store.tryAcquire(memberName, owner, duration);
    if (lease.isEmpty()) {
      return;
    }
    if (m != null) {
      log.info("Listener {}: membership was lost ({}); joined again as epoch {}", owner,
          m.lostReason(), lease.get().epoch());
    }
    LeaseKeeper keeper = new LeaseKeeper(store, lease.get(), start, duration, config.renewInterval(),
        scheduler, ticker, (lost, cause) -> log.warn("Listener {}: membership lost: {}", owner,
            cause.getMessage()));
    membership = keeper;
    keeper.start();
  }

  /** Records a live peer; whether it has been a member long enough to be counted. */
  private boolean observe(LeaseRecord r, long now) {
    Peer p = peers.get(r.name());
    if (p == null) {
      // Members already there when this one starts have settled; later ones must settle first.
      p = new Peer(r.epoch(), firstRefresh ? now - maxSettleNanos : now);
      peers.put(r.name(), p);
    } else if (p.epoch != r.epoch()) {
      // It lost its membership (paused, cut off, restarted with the same identity) and joined
      // again: a flap. Each one seen lately lengthens the time before it counts again.
      p.flaps = now - p.lastFlapNanos > flapMemoryNanos ? 1 : p.flaps + 1;
      p.lastFlapNanos = now;
      p.epoch = r.epoch();
      p.sinceNanos = now;
    }
    p.lastSeenNanos = now;
    return now - p.sinceNanos >= settleNanos(p.flaps);
  }

  private long settleNanos(int flaps) {
    long settle = baseSettleNanos;
    for (int i = 0; i < flaps && settle < maxSettleNanos; i++) {
      settle *= FLAP_FACTOR;
    }
    return Math.min(settle, maxSettleNanos);
  }

  private void deleteDeadRecord(LeaseRecord r) {
    try {
      if (store.deleteIfIdle(r.name(), r.epoch())) {
        log.info("Listener {}: removed the record of member {} (expired at {})", owner, r.name(),
            r.expiresAt());
      }
    } catch (RuntimeException e) {
      log.debug("Removing the dead member record {} failed: {}", r.name(), e.toString());
    }
  }

  /**
   * What the partition records of this layout say now: who holds which, how long until each
   * holder's first held lease expires (a duration on the store's clock), and when each holder's
   * last lease that ran out without a release expired.
   */
  private record PartitionRecords(Map<Integer, String> holders, Map<String, Duration> firstExpiry,
      Map<String, Instant> lastLapse) { }

  private PartitionRecords partitionRecords() {
    PartitionRecords out = new PartitionRecords(new HashMap<>(), new HashMap<>(), new HashMap<>());
    for (LeaseRecord r : store.list(config.partitionPrefix())) {
      Integer i = partitionIndex.get(r.name());
      if (i == null || r.owner() == null || r.expiresAt() == null) {
        continue; // another layout's, or released
      }
      if (r.isHeld()) {
        out.holders.put(i, r.owner());
        out.firstExpiry.merge(r.owner(), Duration.between(r.storeTime(), r.expiresAt()), Assignment::earlier);
      } else {
        out.lastLapse.merge(r.owner(), r.expiresAt(), (a, b) -> a.isAfter(b) ? a : b);
      }
    }
    return out;
  }

  private static Duration earlier(Duration a, Duration b) {
    return a == null ? b : b == null || a.compareTo(b) <= 0 ? a : b;
  }

  /** Whether nobody has held {@code partition} for a whole lease duration. */
  private boolean orphaned(int partition, long now) {
    Long since = unheldSince.get(partition);
    return since != null && now - since >= duration.toNanos();
  }

  /**
   * Whether this instance may try to acquire {@code partition} now; if so, the attempt holds a
   * place in the quota until {@link #acquired} or {@link #unreserve}. Reserving, not just checking,
   * matters: the partitions' workers decide at the same moment, and two of them both seeing room for
   * one would both acquire, the second counted as an adopted orphan that is never handed back (three
   * instances on four partitions then stayed at 2, 2 and 0).
   */
  synchronized boolean reserve(int partition) {
    if (held.contains(partition)) {
      return true;
    }
    if (held.size() - adopted.size() + reservedUnderQuota.size() < quota) {
      reservedUnderQuota.add(partition);
      return true;
    }
    if (orphaned(partition, ticker.nanos())) {
      reservedAsOrphan.add(partition);
      return true;
    }
    return false;
  }

  /** The attempt after {@link #reserve} did not acquire the partition. */
  synchronized void unreserve(int partition) {
    reservedUnderQuota.remove(partition);
    reservedAsOrphan.remove(partition);
  }

  /** The partition was acquired; one reserved as an orphan is adopted beyond the quota. */
  synchronized void acquired(int partition) {
    boolean underQuota = reservedUnderQuota.remove(partition);
    if (reservedAsOrphan.remove(partition) && !underQuota) {
      adopted.put(partition, counted);
      log.info("Listener {}: adopted partition {}, unheld for over {}", owner, partition, duration);
    }
    held.add(partition);
    unheldSince.remove(partition);
  }

  /** The partition is no longer held: released, handed back, or its lease known lost. */
  synchronized void released(int partition) {
    held.remove(partition);
    adopted.remove(partition);
    unreserve(partition);
  }

  /**
   * Whether this instance should hand {@code partition} back: its excess, highest first; or an
   * adopted partition, highest first, while counted peers lack partitions to reach their quotas
   * and every partition is held (seen on two refreshes in a row). An adoption is handed back once
   * per membership: a peer that failed a partition for good is under its quota without taking it,
   * and the partition, adopted again after a lease, is then kept.
   */
  synchronized boolean shouldHandBack(int partition) {
    if (adopted.containsKey(partition)) {
      boolean back = wanted.count() > 0
          && returnableAdoptions().stream().limit(wanted.count()).anyMatch(p -> p == partition);
      if (back) {
        wanted.usedOne();
        returnedAdoptions.put(partition, counted);
        log.info("Listener {}: hands back adopted partition {}: a counted member is under its quota and every"
            + " partition is held", owner, partition);
      }
      return back;
    }
    int beyond = Math.min(excess.count(), held.size() - adopted.size() - quota);
    if (beyond <= 0) {
      return false;
    }
    // Hand back the highest-numbered partitions: deterministic, so two workers do not both leave.
    boolean handBack = held.descendingSet().stream().filter(p -> !adopted.containsKey(p))
        .limit(beyond).anyMatch(p -> p == partition);
    if (handBack) {
      excess.usedOne();
    }
    return handBack;
  }

  /** Sets the quota as a refresh would; for tests of the acquisition rules. */
  synchronized void quotaForTest(int q) {
    quota = q;
  }

  /** The quota last computed; for status and tests. */
  int quota() {
    return quota;
  }

  /** Leaves the group: deletes the membership record so peers rebalance at once. */
  void leave() {
    leaving = true;
    synchronized (this) {
      if (expiryRefresh != null) {
        expiryRefresh.cancel(false);
      }
    }
    LeaseKeeper m = membership;
    if (m == null) {
      return;
    }
    m.retire();
    if (m.lostReason() != null) {
      return;
    }
    try {
      store.delete(m.lease());
    } catch (RuntimeException e) {
      log.debug("Deleting membership {} failed (it will expire): {}", memberName, e.toString());
    }
  }

  /**
   * A count that holds only once it was above zero on {@link #CONFIRMATIONS} refreshes in a row: a
   * single refresh can see a passing state (a member joining or leaving, a partition between two
   * holders), and a partition handed back on it would move twice.
   */
  private static final class Confirmed {
    private int refreshesInARow;
    private int count;

    void refresh(int seen) {
      refreshesInARow = seen > 0 ? refreshesInARow + 1 : 0;
      count = refreshesInARow >= CONFIRMATIONS ? seen : 0;
    }

    int count() {
      return count;
    }

    /** One of the counted partitions was handed back. */
    void usedOne() {
      count = Math.max(0, count - 1);
    }
  }
}
