package dev.sluice.shedlock;

import dev.sluice.ConfigurationException;
import dev.sluice.lock.LockProvider;
import dev.sluice.lock.TimedLock;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * ShedLock's {@link net.javacrumbs.shedlock.core.LockProvider} on Sluice's locks: a ShedLock
 * user switches by declaring this one bean and keeps {@code @SchedulerLock}, {@code
 * LockAssert} and {@code LockExtender} as they are.
 *
 * <pre>{@code
 * @Bean
 * LockProvider lockProvider(MongoClient client) {
 *   MongoLeaseStore store = MongoLeaseStore.builder(client.getDatabase("app")).build();
 *   return SluiceShedLockProvider.of(dev.sluice.lock.LockProvider.on(store).build());
 * }
 * }</pre>
 *
 * <p>What changes for the user:
 * <ul>
 *   <li>Every lock has a fencing token, strictly increasing per name across all processes: the
 *       task reads it with {@link #currentToken(String)} and passes it to what it writes, so a
 *       run that overran {@code lockAtMostFor} (a long GC pause, a hung call) is rejected by the
 *       target instead of overlapping the next run.
 *   <li>{@code lockAtMostFor} and {@code lockAtLeastFor} are judged on the database's clock, never
 *       on the clocks of the application servers.
 *   <li>The lock lives in Sluice's lease store (MongoDB, PostgreSQL, MariaDB/MySQL), next to the
 *       listeners' leases, under the Sluice provider's name prefix ({@code lock:} by default).
 * </ul>
 *
 * <p>Semantics are ShedLock's: one attempt, no waiting; the lock expires at {@code
 * lockAtMostFor} whether or not the task still runs (it is not kept alive: use Sluice's own
 * {@link LockProvider#acquire} for that); an unlock keeps it taken until {@code lockAtLeastFor};
 * {@link SimpleLock#extend} moves both and returns a new lock, after which the old one is
 * invalid. Passes ShedLock's own provider test suite on MongoDB, PostgreSQL and MariaDB.
 *
 * <p>Thread-safe. Closing the Sluice {@link LockProvider} releases the locks it still holds.
 */
public final class SluiceShedLockProvider implements ExtensibleLockProvider {
  /** The locks this thread took through any instance, for {@link #currentToken}. */
  private static final ThreadLocal<Map<String, TimedLock>> HELD_HERE =
      ThreadLocal.withInitial(HashMap::new);

  private final LockProvider locks;

  private SluiceShedLockProvider(LockProvider locks) {
    this.locks = locks;
  }

  /** A ShedLock provider whose locks are taken from {@code locks}. */
  public static SluiceShedLockProvider of(LockProvider locks) {
    return new SluiceShedLockProvider(ConfigurationException.requireNonNull(locks, "locks"));
  }

  /**
   * The fencing token of lock {@code name} if this thread holds it through a {@code
   * SluiceShedLockProvider} (ShedLock runs a locked task on the thread that took its lock), and
   * the lock has neither been released nor run out on this process's reckoning. Pass it to every
   * system the task writes to; see {@code docs/locks.md}.
   */
  public static OptionalLong currentToken(String name) {
    Map<String, TimedLock> held = HELD_HERE.get();
    TimedLock lock = held.get(name);
    if (lock == null) {
      return OptionalLong.empty();
    }
    if (!lock.isHeld()) {
      held.remove(name);
      return OptionalLong.empty();
    }
    return OptionalLong.of(lock.token());
  }

  @Override
  public Optional<SimpleLock> lock(LockConfiguration configuration) {
    return locks.tryAcquireFor(configuration.getName(), atMostFor(configuration),
        atLeastFor(configuration)).map(lock -> new FencedLock(configuration, lock));
  }

  /**
   * ShedLock states its terms twice: as instants on the application's clock (for providers that
   * store them) and as durations. Sluice counts durations on the store's clock from the moment it
   * grants the lock, so the durations are what it takes: no application clock is read, and two
   * clocks of different precision cannot turn a zero {@code lockAtLeastFor} into a fraction of a
   * millisecond that keeps the lock after its release. At least 1 ms, as a lock has to exist.
   */
  private static Duration atMostFor(LockConfiguration configuration) {
    Duration atMost = configuration.getLockAtMostFor();
    return atMost.toMillis() >= 1 ? atMost : Duration.ofMillis(1);
  }

  private static Duration atLeastFor(LockConfiguration configuration) {
    Duration atLeast = configuration.getLockAtLeastFor();
    Duration atMost = atMostFor(configuration);
    if (atLeast.isNegative()) {
      return Duration.ZERO;
    }
    return atLeast.compareTo(atMost) > 0 ? atMost : atLeast;
  }

  @Override
  public String toString() {
    return "SluiceShedLockProvider[" + locks + "]";
  }

  /**
   * A ShedLock lock that is a Sluice {@link TimedLock}: {@link #token()} is its fencing token.
   * ShedLock's base class makes it single-use: after {@code unlock} or {@code extend} it is
   * invalid and any further call throws {@link IllegalStateException}.
   */
  public static final class FencedLock extends AbstractSimpleLock {
    private final TimedLock lock;

    private FencedLock(LockConfiguration configuration, TimedLock lock) {
      super(configuration);
      this.lock = lock;
      HELD_HERE.get().put(configuration.getName(), lock);
    }

    /** The fencing token: greater than that of every earlier holder of this lock name. */
    public long token() {
      return lock.token();
    }

    /** Whether the lock is still held on this process's cautious reckoning. */
    public boolean isHeld() {
      return lock.isHeld();
    }

    @Override
    protected void doUnlock() {
      HELD_HERE.get().remove(lockConfiguration.getName(), lock);
      lock.close();
    }

    @Override
    protected Optional<SimpleLock> doExtend(LockConfiguration extended) {
      if (!lock.extend(atMostFor(extended), atLeastFor(extended))) {
        HELD_HERE.get().remove(lockConfiguration.getName(), lock);
        return Optional.empty();
      }
      return Optional.of(new FencedLock(extended, lock));
    }

    @Override
    public String toString() {
      return "FencedLock[" + lock + "]";
    }
  }
}
