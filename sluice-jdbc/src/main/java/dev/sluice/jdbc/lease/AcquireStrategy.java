package dev.sluice.jdbc.lease;

import dev.sluice.lease.Lease;
import java.time.Duration;
import java.util.Optional;

/**
 * How the SQL lease store takes a lease: {@link UpsertAcquire}, one statement where the server
 * has an upsert with {@code RETURNING} (ADR 0072), or {@link ReadThenWriteAcquire}, the
 * compare-and-swap transaction of {@code seeds/002} elsewhere (ADR 0021). Both decide on the
 * database's clock and seed epochs from it, so either keeps them strictly increasing.
 */
interface AcquireStrategy {
  /**
   * The lease if {@code owner} took it (or already held it: then extended, with a new epoch);
   * empty if someone else holds it or won the race. Each request waits at most {@code bound} ms.
   */
  Optional<Lease> acquire(String name, String owner, Duration duration, long bound);
}
