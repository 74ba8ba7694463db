package dev.sluice.lease;

import dev.sluice.feed.Position;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * SPI: durable leases with fencing tokens, the one mechanism behind listener partitions and
 * distributed locks. See {@code docs/adr/0001-lease-algorithm.md}.
 *
 * <p>Every implementation must pass {@code LeaseStoreContract} in the testkit. Its rules:
 *
 * <ul>
 *   <li>Expiry is judged on the store's clock ({@link #now()}), never the caller's.
 *   <li>At any instant at most one owner holds a name.
 *   <li>Every successful {@link #tryAcquire} returns an epoch strictly greater than any epoch
 *       ever granted for that name, even after release, expiry, a lost insert race or the
 *       deletion of the record (by {@link #delete}, {@link #deleteIfIdle}, a TTL clean-up or an
 *       operator).
 *   <li>{@link #renew}, {@link #commit} and {@link #release} succeed only while owner
 *       <em>and</em> epoch still match: a stale holder can never extend, move the checkpoint or
 *       release a lease someone else now holds.
 *   <li>Contention is not an error: losing a race (including a duplicate-key insert race) yields
 *       {@link Optional#empty()}.
 *   <li>Any other failure is a {@link LeaseStoreException}: {@link
 *       LeaseStoreException#retryable() retryable} if the same call may succeed later (server
 *       unreachable, timeout, failover, serialization conflict), not retryable if only a change
 *       of configuration can fix it (authorization, missing table, rejected document).
 * </ul>
 *
 * <p>Implementations are thread-safe.
 */
public interface LeaseStore {

  /**
   * Acquires {@code name} for {@code owner} if nobody holds it (never held, released, or expired
   * on the store's clock). Acquiring always starts a new epoch, also when {@code owner} held it
   * before: the previous incarnation's work must be fenced off.
   *
   * @return the new lease with its checkpoint, or empty if someone else holds it
   */
  Optional<Lease> tryAcquire(String name, String owner, Duration duration);

  /**
   * Extends a held lease to {@code duration} from now on the store's clock.
   *
   * @throws LeaseLostException if owner or epoch no longer match
   */
  Lease renew(Lease lease, Duration duration);

  /**
   * Records {@code checkpoint} as the processed position; a fenced write.
   *
   * @throws LeaseLostException if owner or epoch no longer match
   */
  Lease commit(Lease lease, Position checkpoint);

  /**
   * Gives the lease up so another owner can take it at once. Keeps epoch and checkpoint. Does
   * nothing if the lease is no longer held by this owner and epoch.
   *
   * @return whether this call released it
   */
  boolean release(Lease lease);

  /** What the store holds for {@code name}, if anything. */
  Optional<LeaseRecord> read(String name);

  /** Every record whose name starts with {@code prefix}, ordered by name. */
  List<LeaseRecord> list(String prefix);

  /** The store's clock: the time every expiry is judged by. */
  Instant now();

  /**
   * Deletes the record of a lease this owner still holds (owner and epoch match), for records
   * that are never reused, such as one process's group membership. A fenced write: a stale owner
   * or epoch deletes nothing. The holder's later renew/commit throw {@link LeaseLostException}.
   * Epochs granted for the name afterwards are still higher than {@code lease.epoch()}.
   *
   * @return whether this call deleted it (false if the lease is no longer this owner's and
   *     epoch's, or was already deleted)
   * @throws LeaseStoreException if the store failed
   */
  boolean delete(Lease lease);

  /**
   * Deletes {@code name}'s record if nobody holds it (released, or expired on the store's clock)
   * and its epoch is still {@code epoch}: clean-up that can never remove a held lease or a record
   * someone re-acquired since it was read (every acquisition changes the epoch). Deleting also
   * deletes the checkpoint; whether a record may be deleted is the caller's decision. Epochs
   * stay monotonic after a deletion.
   *
   * @return whether this call deleted it
   * @throws LeaseStoreException if the store failed
   */
  boolean deleteIfIdle(String name, long epoch);

  /**
   * Optional: calls {@code released} with the name of a record under {@code prefix} soon after
   * it was released or deleted, so that a peer waiting for it can try at once instead of at its
   * next scheduled attempt (a stopped listener's partitions are then taken over in well under an
   * acquire interval). A hint only: it may come late, twice, or never, and decides nothing (the
   * acquisition itself does). Called from a thread of the store's. The default watches nothing.
   *
   * @return stops the watch
   */
  default AutoCloseable watchReleases(String prefix, java.util.function.Consumer<String> released) {
    return () -> { };
  }

  /**
   * Optional: the condition, besides renewing in time, under which the holder of {@code lease} (as
   * granted by this store's {@link #tryAcquire}) may go on acting, for stores that let a standby
   * take a lease before its expiry once they know the holder stopped (ADR 0114). The lease's keeper
   * stops at the earlier of the lease's local deadline and this condition's end. Null (the default):
   * only the lease's own expiry counts. A store that wraps another (metrics, tracing) must forward
   * this together with {@link #watchReleases} and {@link #tryAcquire}: a wrapper that hid it would
   * let standbys take leases early from holders that do not know they must stop.
   */
  default HolderLiveness liveness(Lease lease) {
    return null;
  }
}
