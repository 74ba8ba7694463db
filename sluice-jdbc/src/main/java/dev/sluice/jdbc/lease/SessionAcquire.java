package dev.sluice.jdbc.lease;

import dev.sluice.lease.HolderLiveness;
import dev.sluice.lease.Lease;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Acquisition with session liveness on PostgreSQL (docs/adr/0114-sql-lease-holder-session-liveness.md):
 * ADR 0072's one-statement upsert, which also records the holder's liveness session in the row
 * ({@code holder_pid}, {@code holder_since}, {@code holder_bound_ms}, and {@code holder_epoch}, the
 * epoch the session was recorded for: any later acquisition without a session changes the epoch and
 * so retires it), and whose "free" condition has one more case: the row's recorded session is the
 * one this store found gone at least the holder's bound ago ({@link GoneSessions#eligible}), for
 * the same epoch, and the statement finds it gone still. The epoch rule is ADR 0072's.
 */
final class SessionAcquire implements AcquireStrategy {
  private final LeaseCalls calls;
  private final String table;
  private final SessionLiveness liveness;
  private final GoneSessions gone;
  /** The session each lease this store granted was recorded with, by name. */
  private final Map<String, Granted> granted = new ConcurrentHashMap<>();

  private record Granted(long epoch, SessionLiveness.Session session) {}

  SessionAcquire(LeaseCalls calls, String table, SessionLiveness liveness, GoneSessions gone) {
    this.calls = calls;
    this.table = table;
    this.liveness = liveness;
    this.gone = gone;
  }

  @Override
  public Optional<Lease> acquire(String name, String owner, Duration duration, long bound) {
    SessionLiveness.Session session = liveness.sessionForGrant(bound);
    GoneSessions.Gone found = gone.eligible(name);
    Optional<Lease> lease = calls.call("tryAcquire", name, bound,
        (c, d) -> upsert(c, name, owner, duration, session, found));
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

  private Optional<Lease> upsert(Connection c, String name, String owner, Duration duration,
      SessionLiveness.Session session, GoneSessions.Gone found) throws SQLException {
    String micros = SqlDialect.POSTGRESQL.nowMicros;
    String sql = "INSERT INTO " + table + " AS t (name, owner, epoch, expires_at, version,"
        + " holder_pid, holder_since, holder_bound_ms, holder_epoch)"
        + " VALUES (?, ?, " + micros + ", now() + ? * INTERVAL '1 microsecond', 1, ?, ?, ?, " + micros + ")"
        + " ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner,"
        + " epoch = GREATEST(t.epoch + 1, EXCLUDED.epoch), expires_at = EXCLUDED.expires_at,"
        + " version = t.version + 1, holder_pid = EXCLUDED.holder_pid,"
        + " holder_since = EXCLUDED.holder_since, holder_bound_ms = EXCLUDED.holder_bound_ms,"
        + " holder_epoch = GREATEST(t.epoch + 1, EXCLUDED.epoch)"
        + " WHERE t.owner IS NULL OR t.expires_at IS NULL OR t.expires_at <= now()"
        + " OR t.owner = EXCLUDED.owner"
        + " OR (t.epoch = ? AND t.holder_pid = ? AND t.holder_since = ? AND " + GoneSessions.SESSION_GONE + ")"
        + " RETURNING t.owner, t.epoch, t.expires_at, t.checkpoint, t.checkpoint_time";
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, name);
      ps.setString(2, owner);
      ps.setLong(3, LeaseStatements.durationMicros(duration));
      if (session == null) {
        ps.setNull(4, Types.INTEGER);
        ps.setNull(5, Types.TIMESTAMP_WITH_TIMEZONE);
        ps.setNull(6, Types.BIGINT);
      } else {
        ps.setInt(4, session.pid());
        ps.setObject(5, OffsetDateTime.ofInstant(session.since(), ZoneOffset.UTC));
        ps.setLong(6, liveness.boundMillis());
      }
      if (found == null) {
        ps.setNull(7, Types.BIGINT);
        ps.setNull(8, Types.INTEGER);
        ps.setNull(9, Types.TIMESTAMP_WITH_TIMEZONE);
      } else {
        ps.setLong(7, found.epoch());
        ps.setInt(8, found.pid());
        ps.setObject(9, OffsetDateTime.ofInstant(found.since(), ZoneOffset.UTC));
      }
      return UpsertAcquire.taken(c, SqlDialect.POSTGRESQL, ps, name, owner);
    }
  }
}
