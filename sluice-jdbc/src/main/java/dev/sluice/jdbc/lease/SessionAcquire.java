package dev.sluice.jdbc.lease;

import dev.sluice.lease.HolderLiveness;
import dev.sluice.lease.Lease;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Acquisition with session liveness (docs/adr/0114-sql-lease-holder-session-liveness.md): ADR
 * 0072's one-statement upsert ({@link SessionSql#acquireStatement}), which also records the
 * holder's liveness session in the row ({@code holder_pid}, {@code holder_since},
 * {@code holder_bound_ms}, and {@code holder_epoch}, the epoch the session was recorded for: any
 * later acquisition without a session changes the epoch and so retires it), and whose "free"
 * condition has one more case when this store found the row's session gone at least the holder's
 * bound ago ({@link GoneSessions#eligible}): that session, for the same epoch, still gone when the
 * statement runs. The epoch rule is ADR 0072's.
 */
final class SessionAcquire implements AcquireStrategy {
  private final LeaseCalls calls;
  private final LeaseTable table;
  private final SessionLiveness liveness;
  private final GoneSessions gone;
  /** The session each lease this store granted was recorded with, by name. */
  private final Map<String, Granted> granted = new ConcurrentHashMap<>();

  private record Granted(long epoch, SessionSql.Session session) {}

  SessionAcquire(LeaseCalls calls, LeaseTable table, SessionLiveness liveness, GoneSessions gone) {
    this.calls = calls;
    this.table = table;
    this.liveness = liveness;
    this.gone = gone;
  }

  @Override
  public Optional<Lease> acquire(String name, String owner, Duration duration, long bound) {
    GoneSessions.Gone found = gone.eligible(name);
    // The store asked the table first, so the dialect is known. Waits for the first confirmation
    // (at most the bound) before borrowing the call's connection: the session needs one too.
    SessionSql sql = SessionSql.of(table.knownDialect());
    SessionSql.Session session = liveness.sessionForGrant(sql, bound);
    Optional<Lease> lease = calls.call("tryAcquire", name, bound,
        (c, d) -> upsert(c, sql, name, owner, duration, session, found));
    if (lease.isEmpty() && found != null) {
      // Someone else was first, or the session is there after all (the server the watch asked is
      // not the one the leases are written on): look again from the start, a bound later.
      gone.retract(name, found);
    }
    lease.ifPresent(l -> {
      gone.taken(name);
      if (session == null) {
        granted.remove(name);
      } else {
        granted.put(name, new Granted(l.epoch(), session));
      }
    });
    return lease;
  }

  /** The holder's condition for {@code lease} if this store granted it with a session; else null. */
  HolderLiveness liveness(Lease lease) {
    Granted g = granted.get(lease.name());
    return g == null || g.epoch() != lease.epoch() ? null : liveness.holderLiveness(g.session());
  }

  /** {@code name} is no longer held by this store (released or deleted). */
  void forget(String name) {
    granted.remove(name);
  }

  private Optional<Lease> upsert(Connection c, SessionSql sql, String name, String owner,
      Duration duration, SessionSql.Session session, GoneSessions.Gone found) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql.acquireStatement(table.name(), found != null))) {
      ps.setString(1, name);
      ps.setString(2, owner);
      ps.setLong(3, LeaseStatements.durationMicros(duration));
      sql.bindId(ps, 4, session == null ? null : session.id());
      sql.dialect.setTime(ps, 5, session == null ? null : session.since());
      if (session == null) {
        ps.setNull(6, Types.BIGINT);
      } else {
        ps.setLong(6, liveness.boundMillis());
      }
      for (int use = 0, i = 7; found != null && use < sql.foundGoneUses; use++, i += 3) {
        ps.setLong(i, found.epoch());
        sql.bindId(ps, i + 1, found.id());
        sql.dialect.setTime(ps, i + 2, found.since());
      }
      return UpsertAcquire.taken(c, sql.dialect, ps, name, owner);
    }
  }
}
