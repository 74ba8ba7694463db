package dev.sluice.mongodb.chaos;

import dev.sluice.lease.LeaseRecord;
import java.time.Duration;
import java.time.Instant;

/**
 * The longest time a partition had no owner, on the lease store's clock, from the lease records
 * the harness samples every 100 ms: from the end of one tenure to the acquisition of the next.
 *
 * <p>An end is the tenure's expiry ({@code expiresAt} of its record) when it expired, or the store
 * time of the last sample that still showed it held when it was released (the release time is not
 * kept). An acquisition is the earlier of the store time of the first sample that shows the new
 * epoch held and that sample's {@code expiresAt} less the lease (equal to the acquisition until
 * the first renewal). Both err towards a longer gap, by at most a sampling period: the figure is
 * an upper bound. Only gaps that began while {@link #counting} was on are kept (while the writer
 * wrote); the first acquisition of each partition has no gap before it.
 */
final class Ownership {
  private static final class Tenure {
    final long epoch;
    Instant lastExpires;
    Instant lastSeenHeld;

    Tenure(long epoch, Instant expires, Instant seen) {
      this.epoch = epoch;
      this.lastExpires = expires;
      this.lastSeenHeld = seen;
    }
  }

  private final Tenure[] current;
  private final Instant[] gapStart;
  private final Duration lease;
  private volatile boolean counting;
  private int worstPartition = -1;
  private Instant worstFrom = Instant.EPOCH;
  private Duration worst = Duration.ZERO;

  Ownership(int partitions, Duration lease) {
    this.current = new Tenure[partitions];
    this.gapStart = new Instant[partitions];
    this.lease = lease;
  }

  void counting(boolean on) {
    counting = on;
  }

  synchronized void sample(int partition, LeaseRecord r) {
    Tenure t = current[partition];
    Instant now = r.storeTime();
    if (r.isHeld()) {
      if (t != null && t.epoch == r.epoch()) {
        t.lastExpires = r.expiresAt();
        t.lastSeenHeld = now;
        return;
      }
      Instant acquired = min(now, r.expiresAt().minus(lease));
      Instant start = gapStart[partition];
      if (start == null && t != null) {
        // Taken over between two samples: the old tenure ran to its expiry unless it was released.
        start = !acquired.isBefore(t.lastExpires) ? t.lastExpires : t.lastSeenHeld;
      }
      if (start != null && counting) {
        Duration gap = Duration.between(start, acquired);
        if (gap.compareTo(worst) > 0) {
          worst = gap;
          worstPartition = partition;
          worstFrom = start;
        }
      }
      current[partition] = new Tenure(r.epoch(), r.expiresAt(), now);
      gapStart[partition] = null;
    } else if (t != null && gapStart[partition] == null) {
      gapStart[partition] = r.owner() != null && r.expiresAt() != null && r.epoch() == t.epoch
          ? min(r.expiresAt(), now) : t.lastSeenHeld;
    }
  }

  synchronized ChaosReport.Gap longestGap() {
    return new ChaosReport.Gap(worstPartition, worstFrom.toEpochMilli(), worst);
  }

  private static Instant min(Instant a, Instant b) {
    return a.isBefore(b) ? a : b;
  }
}
