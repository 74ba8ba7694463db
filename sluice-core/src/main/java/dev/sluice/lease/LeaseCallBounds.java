package dev.sluice.lease;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * How long a {@link LeaseStore}'s calls may wait, the one rule every backend applies
 * (docs/adr/0101-lease-store-calls-bounded-by-the-lease.md). A call made for a lease this process
 * holds (renew, commit, release) is bounded by a third of the lease, but at least
 * {@value #MIN_LEASE_BOUND_MILLIS} ms, and at most the store's operation timeout; any other call
 * (an acquisition, which holds nothing yet, a read) by the operation timeout. Renewals come at most
 * every third of the lease, so a call stuck on a connection nobody answers fails while the next
 * renewal can still get through on a fresh connection before the local deadline.
 *
 * <p>Remembers the duration of each lease the store granted or renewed, by name, so that a commit
 * or a release, which is not told the duration, is bounded like that lease's renewals.
 */
public final class LeaseCallBounds {
  /**
   * The least bound of a lease's call: below it an ordinary hiccup (a GC pause, a busy server)
   * would fail calls and break connections, and a very short timed lock could not be taken.
   */
  public static final long MIN_LEASE_BOUND_MILLIS = 1_000;

  private final long operationTimeoutMillis;
  private final Map<String, Long> durations = new ConcurrentHashMap<>();

  public LeaseCallBounds(Duration operationTimeout) {
    this.operationTimeoutMillis = operationTimeout.toMillis();
  }

  /** The bound of a call not made for a held lease. */
  public long operationTimeoutMillis() {
    return operationTimeoutMillis;
  }

  /** The bound of a call made for a held lease of {@code duration}. */
  public long forLease(Duration duration) {
    return Math.min(operationTimeoutMillis,
        Math.max(MIN_LEASE_BOUND_MILLIS, duration.toMillis() / 3));
  }

  /**
   * The bound of a call made for held lease {@code name}: as {@link #forLease} for the duration it
   * was last granted or renewed for, else the operation timeout.
   */
  public long forHeld(String name) {
    Long duration = durations.get(name);
    return duration == null ? operationTimeoutMillis : forLease(Duration.ofMillis(duration));
  }

  /** Records that lease {@code name} was granted or renewed for {@code duration}. */
  public void granted(String name, Duration duration) {
    durations.put(name, duration.toMillis());
  }

  /** Forgets lease {@code name}: released. */
  public void released(String name) {
    durations.remove(name);
  }
}
