package dev.sluice.jdbc.lease;

import dev.sluice.lease.Lease;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * Acquisition by the read-then-write transaction of {@code seeds/002} (ADR 0021), for servers
 * without an upsert with {@code RETURNING} (MySQL, MariaDB before 10.5): read the row with the
 * database's clock, insert it or take it over if it is free, expired or this owner's, by
 * compare-and-swap ({@link CasTransactions}); a lost race of any kind is "not acquired".
 */
record ReadThenWriteAcquire(LeaseStatements statements, CasTransactions cas)
    implements AcquireStrategy {
  @Override
  public Optional<Lease> acquire(String name, String owner, Duration duration, long bound) {
    try {
      return Optional.of(cas.run("tryAcquire", name, bound, (c, d) -> {
        LeaseStatements.Row row = statements.select(c, d, name);
        Instant expiresAt = LeaseStatements.expiry(row.now(), duration);
        // Epochs are seeded from the database's clock in microseconds, so that a row deleted
        // and re-created (deleteIfIdle, an operator's DELETE) continues above every epoch it
        // granted before; max() keeps them increasing if the clock steps back meanwhile.
        long seed = LeaseStatements.micros(row.now());
        if (row.name() == null) {
          statements.insert(c, d, name, owner, seed, expiresAt);
          return new Lease(name, owner, seed, expiresAt, null);
        }
        if (row.heldBySomeoneAt() && !owner.equals(row.owner())) {
          return null;
        }
        long epoch = Math.max(Math.addExact(row.epoch(), 1), seed);
        statements.casUpdate(c, "owner = ?, epoch = ?, expires_at = ?", row, ps -> {
          ps.setString(1, owner);
          ps.setLong(2, epoch);
          d.setTime(ps, 3, expiresAt);
          return 4;
        });
        return new Lease(name, owner, epoch, expiresAt, row.checkpoint());
      }));
    } catch (CasTransactions.CasFailed e) {
      return Optional.empty();
    }
  }
}
