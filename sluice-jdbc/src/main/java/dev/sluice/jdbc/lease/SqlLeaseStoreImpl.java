package dev.sluice.jdbc.lease;

import dev.sluice.ConfigurationException;
import dev.sluice.feed.Position;
import dev.sluice.lease.HolderLiveness;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseCallBounds;
import dev.sluice.lease.LeaseRecord;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * The {@link SqlLeaseStore} (its javadoc says what it guarantees): one package-private part per
 * concern (package-info lists them), put together here; built only by
 * {@link SqlLeaseStore.Builder#build()} (ADR 0118).
 */
final class SqlLeaseStoreImpl implements SqlLeaseStore {
  // The parts, one concern each (package-info lists them).
  private final LeaseTable table;
  /** The network timeouts of its calls (ADR 0101), from {@link Builder#operationTimeout}. */
  private final LeaseCallBounds bounds;
  private final LeaseCalls calls;
  private final CasTransactions cas;
  private final LeaseStatements statements;
  private final ReleaseNotices notices;
  private final AcquireStrategy upsertAcquire;
  private final AcquireStrategy readThenWriteAcquire;
  /** Tests only: the read-then-write acquisition also where the server has the upsert. */
  private final boolean forceReadThenWrite;
  /** With session liveness (ADR 0114): the holder's session, else null. */
  private final SessionLiveness liveness;
  /** With session liveness: the sessions found gone, else null. */
  private final GoneSessions goneSessions;
  /** With session liveness: the acquisition that records the session, else null. */
  private final SessionAcquire sessionAcquire;

  SqlLeaseStoreImpl(SqlLeaseStore.Builder b) {
    this.table = new LeaseTable(b.table, b.createTable, b.dialect == null ? null : b.dialect.sql,
        b.sessionLiveness != null);
    this.bounds = new LeaseCallBounds(b.operationTimeout);
    this.calls = new LeaseCalls(b.dataSource, table, bounds.operationTimeoutMillis());
    this.cas = new CasTransactions(calls);
    this.notices = new ReleaseNotices(b.dataSource, b.table);
    this.statements = new LeaseStatements(b.table, notices);
    this.upsertAcquire = new UpsertAcquire(calls, b.table);
    this.readThenWriteAcquire = new ReadThenWriteAcquire(statements, cas);
    this.forceReadThenWrite = b.readThenWriteAcquire;
    if (b.sessionLiveness == null) {
      this.liveness = null;
      this.goneSessions = null;
      this.sessionAcquire = null;
    } else {
      this.liveness = new SessionLiveness(b.dataSource, b.sessionLiveness);
      this.goneSessions = new GoneSessions(calls, b.table);
      this.sessionAcquire = new SessionAcquire(calls, table, liveness, goneSessions);
    }
  }

  /**
   * One statement where the server has an upsert with RETURNING (PostgreSQL; MariaDB 10.5 and
   * later): an insert, or an update of the existing row only if it is free, expired or this
   * owner's, judged on the row as it is when the statement locks it (ADR 0072). Elsewhere (MySQL)
   * the read-then-write transaction of seed 002.
   */
  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    requireName(name);
    ConfigurationException.requireNonNull(owner, "owner");
    requireDuration(duration);
    // An acquisition holds nothing yet: the operation timeout, not a third of the lease (ADR 0101).
    long bound = bounds.operationTimeoutMillis();
    Boolean upsert = table.upsertReturning();
    if (upsert == null) {
      upsert = calls.call("tryAcquire", name, bound, (c, d) -> table.upsertReturning());
    }
    // With session liveness the server has the upsert (LeaseTable refuses anything else).
    AcquireStrategy strategy = forceReadThenWrite || !upsert ? readThenWriteAcquire
        : sessionAcquire != null ? sessionAcquire : upsertAcquire;
    Optional<Lease> lease = strategy.acquire(name, owner, duration, bound);
    lease.ifPresent(l -> bounds.granted(name, duration));
    return lease;
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    requireDuration(duration);
    Lease renewed = cas.fencedWrite("renew", lease, bounds.forLease(duration), (c, d) -> {
      LeaseStatements.Row row = statements.selectMatching(c, d, lease);
      Instant expiresAt = LeaseStatements.expiry(row.now(), duration);
      statements.casUpdate(c, "expires_at = ?", row, ps -> {
        d.setTime(ps, 1, expiresAt);
        return 2;
      });
      return new Lease(lease.name(), lease.owner(), lease.epoch(), expiresAt, row.checkpoint());
    });
    bounds.granted(lease.name(), duration);
    return renewed;
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    ConfigurationException.requireNonNull(checkpoint, "checkpoint");
    Position stored = new Position(checkpoint.token(),
        checkpoint.time() == null ? null : checkpoint.time().truncatedTo(ChronoUnit.MICROS));
    ConfigurationException.requireNonNull(lease, "lease");
    return cas.fencedWrite("commit", lease, bounds.forHeld(lease.name()), (c, d) -> {
      LeaseStatements.Row row = statements.selectMatching(c, d, lease);
      statements.casUpdate(c, "checkpoint = ?, checkpoint_time = ?", row, ps -> {
        ps.setString(1, stored.token());
        d.setTime(ps, 2, stored.time());
        return 3;
      });
      return new Lease(lease.name(), lease.owner(), lease.epoch(), row.expiresAt(), stored);
    });
  }

  /**
   * One conditional {@code UPDATE} on owner and epoch (every acquisition changes the epoch, so a
   * release after a takeover matches nothing); keeps epoch and checkpoint for the next holder.
   */
  @Override
  public boolean release(Lease lease) {
    ConfigurationException.requireNonNull(lease, "lease");
    boolean released = calls.call("release", lease.name(), bounds.forHeld(lease.name()),
        (c, d) -> statements.release(c, d, lease));
    // Another holder of the name in this process (rare) falls back to the operation timeout.
    bounds.released(lease.name());
    if (released && sessionAcquire != null) {
      sessionAcquire.forget(lease.name());
    }
    return released;
  }

  /**
   * Release notices on PostgreSQL with its JDBC driver: {@code LISTEN} on the table's channel,
   * which releases and deletions notify (above), on one pooled connection held while the watch
   * runs. On MariaDB/MySQL (no notifications) nothing is watched: peers take released partitions at
   * their next attempt. Where the database is not known yet and cannot be reached now, the watch
   * keeps trying in the background and ends quietly if it turns out not to be PostgreSQL.
   */
  @Override
  public AutoCloseable watchReleases(String prefix, Consumer<String> released) {
    ConfigurationException.requireNonNull(prefix, "prefix");
    ConfigurationException.requireNonNull(released, "released");
    AutoCloseable releases = notices.watch(table.knownDialect(), prefix, released);
    if (goneSessions == null) {
      return releases;
    }
    AutoCloseable sessions = goneSessions.watch(prefix, liveness.pollNanos(), released);
    return () -> {
      try {
        releases.close();
      } finally {
        sessions.close();
      }
    };
  }

  /** The lease's session condition if this store granted it with its liveness session (ADR 0114). */
  @Override
  public HolderLiveness liveness(Lease lease) {
    return sessionAcquire == null || lease == null ? null : sessionAcquire.liveness(lease);
  }

  @Override
  public void close() {
    if (liveness != null) {
      liveness.close();
    }
  }

  /**
   * One conditional {@code DELETE} on owner and epoch. Like {@link #deleteIfIdle}, it also
   * requires the row's epoch to be below the database clock in microseconds, so that the epoch a
   * re-created row starts with is above it; only a database clock that stepped back can make
   * this refuse (false).
   */
  @Override
  public boolean delete(Lease lease) {
    ConfigurationException.requireNonNull(lease, "lease");
    String name = lease.name();
    requireName(name);
    boolean deleted = calls.call("delete", name, (c, d) -> statements.deleteWhere(c, d, name,
        x -> "owner = ? AND epoch = ?", (ps, i) -> {
          ps.setString(i, lease.owner());
          ps.setLong(i + 1, lease.epoch());
          return i + 2;
        }));
    if (deleted && sessionAcquire != null) {
      sessionAcquire.forget(name);
    }
    return deleted;
  }

  /**
   * One conditional {@code DELETE}: epoch still the one given, nobody holding it on the
   * database's clock. An acquisition always changes the epoch, so one that committed between the
   * caller's read and this statement makes it match nothing; one still in flight loses its
   * compare-and-swap and returns empty.
   */
  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    requireName(name);
    return calls.call("deleteIfIdle", name, (c, d) -> statements.deleteWhere(c, d, name,
        x -> "epoch = ? AND (owner IS NULL OR expires_at IS NULL OR expires_at <= " + x.now + ")",
        (ps, i) -> {
          ps.setLong(i, epoch);
          return i + 1;
        }));
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    requireName(name);
    return calls.call("read", name, (c, d) -> {
      LeaseStatements.Row row = statements.select(c, d, name);
      return row.name() == null ? Optional.<LeaseRecord>empty() : Optional.of(adjusted(row.toRecord()));
    });
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    ConfigurationException.requireNonNull(prefix, "prefix");
    String pattern = LeaseStatements.prefixPattern(prefix);
    List<LeaseRecord> records = calls.call("list", prefix + "*",
        (c, d) -> statements.list(c, d, pattern));
    // Sorted here: the databases' collations disagree on order; Java's is the contract's.
    records.sort(Comparator.comparing(LeaseRecord::name));
    if (goneSessions != null) {
      records.replaceAll(goneSessions::adjust);
    }
    return records;
  }

  /**
   * With session liveness, a lease whose holder's session this store found gone a bound ago reads
   * as expired: the listener counts its holder out and tries at once (ADR 0114).
   */
  private LeaseRecord adjusted(LeaseRecord r) {
    return goneSessions == null ? r : goneSessions.adjust(r);
  }

  @Override
  public Instant now() {
    return calls.call("now", null, LeaseStatements::now);
  }

  @Override
  public String toString() {
    return "SqlLeaseStore[" + table.name() + ", " + table.knownDialect() + "]";
  }

  private static void requireName(String name) {
    ConfigurationException.requireNonNull(name, "name");
    ConfigurationException.require(!name.isBlank() && name.length() <= 255, "name",
        "'" + name + "'", "must be 1..255 characters, not blank");
  }

  private static void requireDuration(Duration duration) {
    ConfigurationException.requireNonNull(duration, "duration");
    ConfigurationException.require(duration.toMillis() >= 1, "duration", duration,
        "must be at least 1 ms");
  }
}
