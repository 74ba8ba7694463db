package dev.sluice.mongodb.chaos;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A lease store that passes every call on and, on the side, keeps the local deadline of each lease
 * this member holds, by the rule the engine's lease keeper follows (docs/adr/0002-clocks.md,
 * {@code LeaseKeeper}): the start of the last successful acquisition or renewal, plus the lease
 * duration, less a margin of min(duration / 20, 500 ms); a renewal that returns after the deadline
 * does not extend it. {@link ChaosNode}'s handler asks it, at the start of each change, how much
 * of the lease it is handling under is left: a change begun after the deadline is handling past
 * the deadline (docs/adr/0108).
 *
 * <p>The watch reads the clock after the keeper did and before the store call, so its deadline is
 * later than the keeper's by the few microseconds between the two: never earlier, so a change it
 * calls late was late for the keeper too.
 */
final class DeadlineWatch implements LeaseStore {
  private record Key(String name, long epoch) {}

  private final LeaseStore store;
  private final Map<Key, Long> deadlines = new ConcurrentHashMap<>();

  DeadlineWatch(LeaseStore store) {
    this.store = store;
  }

  private static long margin(Duration duration) {
    return Math.min(duration.toNanos() / 20, TimeUnit.MILLISECONDS.toNanos(500));
  }

  /** The local deadline (System.nanoTime) of {@code lease} at {@code epoch}, or null if never granted here. */
  Long deadline(String lease, long epoch) {
    return deadlines.get(new Key(lease, epoch));
  }

  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    long start = System.nanoTime();
    Optional<Lease> lease = store.tryAcquire(name, owner, duration);
    lease.ifPresent(l -> deadlines.put(new Key(l.name(), l.epoch()), start + duration.toNanos() - margin(duration)));
    return lease;
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    long start = System.nanoTime();
    Lease renewed = store.renew(lease, duration);
    long end = System.nanoTime();
    deadlines.computeIfPresent(new Key(renewed.name(), renewed.epoch()), (k, deadline) ->
        end - deadline >= 0 ? deadline : Math.max(deadline, start + duration.toNanos() - margin(duration)));
    return renewed;
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    return store.commit(lease, checkpoint); // a commit does not move the keeper's deadline
  }

  @Override
  public boolean release(Lease lease) {
    return store.release(lease);
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    return store.read(name);
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    return store.list(prefix);
  }

  @Override
  public Instant now() {
    return store.now();
  }

  @Override
  public boolean delete(Lease lease) {
    return store.delete(lease);
  }

  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    return store.deleteIfIdle(name, epoch);
  }

  @Override
  public AutoCloseable watchReleases(String prefix, Consumer<String> released) {
    return store.watchReleases(prefix, released);
  }
}
