package dev.sluice.benchmarks.scale;

import dev.sluice.listener.internal.Balance;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.PriorityQueue;
import java.util.Random;
import java.util.function.ToLongFunction;

/**
 * A discrete-event simulation of one consumer group's lease traffic (issue 15, item 7; ADR
 * 0071): {@code members} processes, {@code partitions} partitions, the engine's defaults (lease
 * 10 s, renewals and membership refreshes every third of it, acquisition attempts at the same
 * interval or just past a holder's expiry, progress heartbeats every 10 s on idle partitions), the
 * real quota rule ({@link Balance}), and a store that answers at once. Each member refreshes its
 * membership (one write) and lists the live members (one read); each held partition renews (a
 * write) and commits a heartbeat (a write); each partition worker of a member under its quota
 * tries its partition (a write, taken or not); an excess is handed back (a write per partition)
 * after two refreshes in a row. At {@code crashAt} one member stops without a word.
 *
 * <p>It reports the store's writes and reads per second in the steady state, the largest second
 * after the crash, and the time from the crash until every partition is held by a live member and
 * until the quotas are met again (each member at floor or ceil of N/M). What it leaves out:
 * network and store latency, checkpoint commits of busy partitions (one per batch), settling of
 * new members and orphan adoption (a crash changes quotas before either matters).
 *
 * <p>Arguments: members (100), partitions (1000), runs with different seeds (5).
 */
public final class LeaseTrafficSimulation {
  private static final long LEASE = 10_000;
  private static final long RENEW = LEASE / 3;
  private static final long ACQUIRE = RENEW;
  private static final long HEARTBEAT = 10_000;
  private static final long EXPIRY_MARGIN = 5;
  private static final long EXPIRY_SPREAD = 50;
  private static final long CRASH_AT = 120_000;
  private static final long END = 240_000;
  private static final long STEADY_FROM = 60_000;

  private record Event(long at, long seq, int kind, int member, int partition, long tag) {}

  private static final int REFRESH = 0;
  private static final int WORKER = 1;
  private static final int RENEWAL = 2;
  private static final int HEARTBEAT_COMMIT = 3;

  private final int members;
  private final int partitions;
  private final Random random;
  private final PriorityQueue<Event> queue = new PriorityQueue<>((a, b) ->
      a.at != b.at ? Long.compare(a.at, b.at) : Long.compare(a.seq, b.seq));
  private long seq;
  private long now;
  // The store.
  private final int[] owner;
  private final long[] expiry;
  private final long[] tenure; // bumps on every acquisition: stale renewal events are ignored
  private final long[] memberExpiry;
  // The members.
  private final boolean[] alive;
  private final int[] held;
  private final int[] quota;
  private final int[] excessSeen;
  private final String[] names;
  // Counters, per simulated second.
  private final long[] writes = new long[(int) (END / 1000) + 1];
  private final long[] reads = new long[(int) (END / 1000) + 1];

  private LeaseTrafficSimulation(int members, int partitions, long seed) {
    this.members = members;
    this.partitions = partitions;
    this.random = new Random(seed);
    owner = new int[partitions];
    Arrays.fill(owner, -1);
    expiry = new long[partitions];
    tenure = new long[partitions];
    memberExpiry = new long[members];
    alive = new boolean[members];
    Arrays.fill(alive, true);
    held = new int[members];
    quota = new int[members];
    Arrays.fill(quota, partitions); // until the first refresh, as if alone (as the engine does)
    excessSeen = new int[members];
    names = new String[members];
    for (int m = 0; m < members; m++) {
      names[m] = String.format("member-%04d", m);
      schedule(random.nextInt((int) RENEW), REFRESH, m, -1);
      for (int p = 0; p < partitions; p++) {
        schedule(random.nextInt((int) ACQUIRE), WORKER, m, p);
      }
    }
  }

  private void schedule(long at, int kind, int member, int partition) {
    schedule(at, kind, member, partition, 0);
  }

  /** {@code tag}: the tenure a renewal or heartbeat belongs to; stale ones are dropped. */
  private void schedule(long at, int kind, int member, int partition, long tag) {
    queue.add(new Event(at, seq++, kind, member, partition, tag));
  }

  private long jitter(long base) {
    return base + (long) ((random.nextDouble() - 0.5) * 0.2 * base);
  }

  private void write() {
    writes[(int) (now / 1000)]++;
  }

  /** What one run measured; times from the crash, -1 if never reached. */
  private record Result(long steadyWrites, long steadyReads, long peakWrites, long allHeldMillis,
      long balancedMillis) {}

  /** Runs until END. */
  private Result run() {
    long allHeldAt = -1;
    long balancedAt = -1;
    int crashed = members / 2;
    boolean crashDone = false;
    while (!queue.isEmpty() && queue.peek().at < END) {
      Event e = queue.poll();
      now = e.at;
      if (!crashDone && now >= CRASH_AT) {
        alive[crashed] = false;
        crashDone = true;
      }
      if (!alive[e.member]) {
        continue;
      }
      switch (e.kind) {
        case REFRESH -> refresh(e.member);
        case WORKER -> attempt(e.member, e.partition);
        case RENEWAL -> renew(e.member, e.partition, e.tag);
        case HEARTBEAT_COMMIT -> heartbeat(e.member, e.partition, e.tag);
        default -> throw new IllegalStateException();
      }
      if (crashDone && allHeldAt < 0 && allHeldByLiveMembers()) {
        allHeldAt = now;
      }
      if (crashDone && allHeldAt >= 0 && balancedAt < 0 && balanced()) {
        balancedAt = now;
      }
    }
    long steadyWrites = 0;
    long steadyReads = 0;
    for (int s = (int) (STEADY_FROM / 1000); s < CRASH_AT / 1000; s++) {
      steadyWrites += writes[s];
      steadyReads += reads[s];
    }
    long seconds = (CRASH_AT - STEADY_FROM) / 1000;
    long peak = 0;
    for (int s = (int) (CRASH_AT / 1000); s < writes.length; s++) {
      peak = Math.max(peak, writes[s]);
    }
    return new Result(steadyWrites / seconds, steadyReads / seconds, peak,
        allHeldAt < 0 ? -1 : allHeldAt - CRASH_AT, balancedAt < 0 ? -1 : balancedAt - CRASH_AT);
  }

  private void refresh(int m) {
    write(); // renew the membership record
    memberExpiry[m] = now + LEASE;
    reads[(int) (now / 1000)]++; // list the group's records
    List<String> live = new ArrayList<>();
    for (int i = 0; i < members; i++) {
      if (memberExpiry[i] > now || i == m) {
        live.add(names[i]);
      }
    }
    quota[m] = Balance.quotas(live, partitions).get(names[m]);
    int excess = held[m] - quota[m];
    excessSeen[m] = excess > 0 ? excessSeen[m] + 1 : 0;
    if (excessSeen[m] >= 2) {
      for (int p = 0; p < partitions && held[m] > quota[m]; p++) {
        if (owner[p] == m) {
          write(); // release
          owner[p] = -1;
          expiry[p] = 0;
          tenure[p]++;
          held[m]--;
        }
      }
      excessSeen[m] = 0;
    }
    schedule(now + jitter(RENEW), REFRESH, m, -1);
  }

  private void attempt(int m, int p) {
    if (owner[p] == m && expiry[p] > now) {
      schedule(now + jitter(ACQUIRE), WORKER, m, p); // holding it: the tenure runs
      return;
    }
    if (held[m] >= quota[m]) {
      schedule(now + jitter(ACQUIRE), WORKER, m, p); // at quota: no store traffic
      return;
    }
    write(); // tryAcquire: one upsert / findOneAndUpdate, taken or not
    if (owner[p] >= 0 && expiry[p] > now) {
      // Held: try again at the acquire interval or just past the expiry, whichever first.
      long pastExpiry = expiry[p] + EXPIRY_MARGIN + random.nextInt((int) EXPIRY_SPREAD);
      schedule(Math.min(now + jitter(ACQUIRE), pastExpiry), WORKER, m, p);
      return;
    }
    if (owner[p] >= 0) {
      held[owner[p]]--; // expired: the crashed (or cut off) holder loses it
    }
    owner[p] = m;
    expiry[p] = now + LEASE;
    tenure[p]++;
    held[m]++;
    schedule(now + RENEW, RENEWAL, m, p, tenure[p]);
    schedule(now + HEARTBEAT, HEARTBEAT_COMMIT, m, p, tenure[p]);
    schedule(now + jitter(ACQUIRE), WORKER, m, p);
  }

  private void renew(int m, int p, long tag) {
    if (owner[p] != m || tenure[p] != tag) {
      return;
    }
    write();
    expiry[p] = now + LEASE;
    schedule(now + RENEW, RENEWAL, m, p, tag);
  }

  private void heartbeat(int m, int p, long tag) {
    if (owner[p] != m || tenure[p] != tag) {
      return;
    }
    write();
    schedule(now + HEARTBEAT, HEARTBEAT_COMMIT, m, p, tag);
  }

  private boolean allHeldByLiveMembers() {
    for (int p = 0; p < partitions; p++) {
      if (owner[p] < 0 || !alive[owner[p]] || expiry[p] <= now) {
        return false;
      }
    }
    return true;
  }

  private boolean balanced() {
    int live = 0;
    for (boolean a : alive) {
      live += a ? 1 : 0;
    }
    int floor = partitions / live;
    for (int m = 0; m < members; m++) {
      if (alive[m] && (held[m] < floor || held[m] > floor + 1)) {
        return false;
      }
    }
    return true;
  }

  public static void main(String[] args) {
    int members = args.length > 0 ? Integer.parseInt(args[0]) : 100;
    int partitions = args.length > 1 ? Integer.parseInt(args[1]) : 1000;
    int runs = args.length > 2 ? Integer.parseInt(args[2]) : 5;
    System.out.printf("%d members, %d partitions, lease %d ms, renew/refresh/acquire every %d ms,"
        + " heartbeat %d ms; one member crashes at %d s%n", members, partitions, LEASE, RENEW,
        HEARTBEAT, CRASH_AT / 1000);
    List<Result> results = new ArrayList<>();
    for (int r = 0; r < runs; r++) {
      long started = System.nanoTime();
      Result x = new LeaseTrafficSimulation(members, partitions, 1000 + r).run();
      System.out.printf("seed %d: steady %d writes/s, %d reads/s; peak after the crash %d writes/s;"
          + " all held %.1f s, balanced %.1f s after the crash (simulated in %.1f s)%n", 1000 + r,
          x.steadyWrites(), x.steadyReads(), x.peakWrites(), x.allHeldMillis() / 1000.0,
          x.balancedMillis() / 1000.0, (System.nanoTime() - started) / 1e9);
      results.add(x);
    }
    summary("steady writes/s", results, Result::steadyWrites);
    summary("steady reads/s", results, Result::steadyReads);
    summary("peak writes/s after the crash", results, Result::peakWrites);
    summary("all held after (ms)", results, Result::allHeldMillis);
    summary("balanced after (ms)", results, Result::balancedMillis);
  }

  private static void summary(String what, List<Result> results, ToLongFunction<Result> figure) {
    long[] sorted = results.stream().mapToLong(figure).sorted().toArray();
    System.out.printf("%-34s median %d  [%d-%d]%n", what, sorted[sorted.length / 2], sorted[0],
        sorted[sorted.length - 1]);
  }
}
