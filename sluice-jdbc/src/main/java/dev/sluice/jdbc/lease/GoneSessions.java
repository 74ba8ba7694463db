package dev.sluice.jdbc.lease;

import dev.sluice.lease.LeaseRecord;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The standby's side of session liveness (docs/adr/0114-sql-lease-holder-session-liveness.md):
 * which held leases' holder sessions this store found gone, and since when. A watch
 * ({@link #watch}, part of the store's {@code watchReleases}) asks the server every poll interval
 * for the held leases under a prefix whose recorded session is no longer on the server
 * ({@link SessionSql#sessionGone}; one that began before the server did is not counted: a restart is
 * not a death, the lease then waits for its expiry). A lease becomes {@linkplain #eligible eligible} one holder's
 * bound (recorded in the row) after the answer that first showed its session gone arrived: by then
 * the holder has stopped acting, since its last confirmed-alive request was answered before the
 * session ended. Then the watch tells the listener (a release notice), and the acquisition may take
 * the lease with the session it found gone ({@link SessionAcquire}), which the statement checks
 * again.
 */
final class GoneSessions {
  private static final Logger log = LoggerFactory.getLogger(GoneSessions.class);

  /** A lease's recorded holder session, found gone: the row's epoch, the session's id and start. */
  record Gone(long epoch, long id, Instant since) {}

  private static final class Entry {
    final Gone gone;
    volatile boolean eligible;

    Entry(Gone gone) {
      this.gone = gone;
    }
  }

  private final Map<String, Entry> entries = new ConcurrentHashMap<>();
  private final LeaseCalls calls;
  private final String table;

  GoneSessions(LeaseCalls calls, String table) {
    this.calls = calls;
    this.table = table;
  }

  /** The session found gone at least the holder's bound ago for {@code name}, or null. */
  Gone eligible(String name) {
    Entry e = entries.get(name);
    return e != null && e.eligible ? e.gone : null;
  }

  /** An attempt with {@code found} did not take {@code name}: forget it, so it is judged anew. */
  void retract(String name, Gone found) {
    entries.computeIfPresent(name, (n, e) -> e.gone.equals(found) ? null : e);
  }

  /** {@code name} was taken (by this store): forget what was found for it. */
  void taken(String name) {
    entries.remove(name);
  }

  /**
   * {@code r} as a standby may act on it: a lease whose holder's session was found gone at least
   * its bound ago reads as expired at the read (the listener counts its holder out and tries at
   * once instead of waiting for the stored expiry); any other record as stored.
   */
  LeaseRecord adjust(LeaseRecord r) {
    Entry e = entries.get(r.name());
    if (e == null || !e.eligible || e.gone.epoch() != r.epoch() || r.expiresAt() == null
        || !r.expiresAt().isAfter(r.storeTime())) {
      return r;
    }
    return new LeaseRecord(r.name(), r.owner(), r.epoch(), r.storeTime(), r.checkpoint(), r.storeTime());
  }

  /**
   * Polls every {@code everyNanos} for held leases under {@code prefix} whose holder's session is
   * gone, and calls {@code released} with each name once it became eligible. Stops on close.
   */
  AutoCloseable watch(String prefix, long everyNanos, Consumer<String> released) {
    ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "sluice-lease-sessions-" + prefix);
      t.setDaemon(true);
      return t;
    });
    timer.setRemoveOnCancelPolicy(true);
    String pattern = LeaseStatements.prefixPattern(prefix);
    timer.scheduleWithFixedDelay(() -> poll(prefix, pattern, timer, released), 0, everyNanos,
        TimeUnit.NANOSECONDS);
    return () -> {
      timer.shutdownNow();
      entries.keySet().removeIf(name -> name.startsWith(prefix));
    };
  }

  private record Found(String name, Gone gone, long boundNanos) {}

  private void poll(String prefix, String pattern, ScheduledThreadPoolExecutor timer,
      Consumer<String> released) {
    List<Found> found;
    try {
      found = calls.call("watchSessions", prefix + "*", (c, d) -> query(c, d, pattern));
    } catch (RuntimeException e) {
      log.debug("Session-liveness poll for {} failed: {}", prefix, e.toString());
      return;
    }
    // After the answer arrived: the sessions ended before this instant, and after their holders'
    // last confirmed requests were answered.
    long arrived = System.nanoTime();
    Set<String> seen = new HashSet<>();
    List<Entry> fresh = new ArrayList<>();
    List<String> freshNames = new ArrayList<>();
    long wait = 0;
    for (Found f : found) {
      seen.add(f.name());
      Entry e = entries.get(f.name());
      if (e == null || !e.gone.equals(f.gone())) {
        e = new Entry(f.gone());
        entries.put(f.name(), e);
        fresh.add(e);
        freshNames.add(f.name());
        wait = Math.max(wait, f.boundNanos());
        log.info("Lease {}: its holder's database session ({}) is gone; eligible in {} ms unless"
            + " taken meanwhile", f.name(), f.gone().id(), TimeUnit.NANOSECONDS.toMillis(f.boundNanos()));
      }
    }
    entries.keySet().removeIf(name -> name.startsWith(prefix) && !seen.contains(name));
    if (fresh.isEmpty()) {
      return;
    }
    long delay = wait - (System.nanoTime() - arrived);
    try {
      timer.schedule(() -> {
        // All eligible first, then the notices: a member's record and its partitions are judged
        // together when the notices make the listener look.
        fresh.forEach(e -> e.eligible = true);
        for (int i = 0; i < fresh.size(); i++) {
          String name = freshNames.get(i);
          if (entries.get(name) == fresh.get(i)) {
            try {
              released.accept(name);
            } catch (RuntimeException ex) {
              log.warn("Session-gone notice for {} failed in its consumer", name, ex);
            }
          }
        }
      }, Math.max(0, delay), TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      // the watch was closed meanwhile
    }
  }

  private List<Found> query(java.sql.Connection c, SqlDialect d, String pattern)
      throws java.sql.SQLException {
    List<Found> found = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement("SELECT t.name, t.epoch, t.holder_pid,"
        + " t.holder_since, t.holder_bound_ms FROM " + table + " t WHERE t.name LIKE ? ESCAPE '!'"
        + " AND t.owner IS NOT NULL AND t.expires_at > " + d.now + " AND "
        + SessionSql.of(d).sessionGone("t."))) {
      ps.setString(1, pattern);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          Gone gone = new Gone(rs.getLong(2), rs.getLong(3), d.getTime(rs, 4));
          long boundNanos = TimeUnit.MILLISECONDS.toNanos(rs.getLong(5));
          // The holder stops a margin before its bound; waiting the bound itself is later still.
          found.add(new Found(rs.getString(1), gone, boundNanos));
        }
      }
    }
    return found;
  }
}
