package dev.sluice.lock;

import dev.sluice.ConfigurationException;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.OwnerId;
import dev.sluice.Ticker;
import java.time.Duration;
import java.util.Optional;

/**
 * Distributed locks with fencing tokens, on top of any {@link LeaseStore} (MongoDB, PostgreSQL,
 * MariaDB/MySQL): a lock <em>is</em> a lease named {@code namePrefix + name}, its fencing token is
 * the lease epoch, and it is extended by renewing the lease. Expiry is judged on the store's
 * clock. See {@code docs/locks.md} and {@code docs/adr/0020-locks-are-leases.md}.
 *
 * <pre>{@code
 * LockProvider locks = LockProvider.on(leaseStore).leaseDuration(Duration.ofSeconds(30)).build();
 * try (Lock lock = locks.acquire("invoice-42", Duration.ofSeconds(10))) {
 *   reportingSystem.update(resource, lock.token()); // the target rejects tokens lower than seen
 * }
 * }</pre>
 *
 * <p>Thread-safe. Close the provider when the application stops: it releases the locks it still
 * holds and stops extending them.
 */
public interface LockProvider extends AutoCloseable {

  /** Starts configuring a provider whose locks are leases in {@code store}. */
  static Builder on(LeaseStore store) {
    return new Builder(ConfigurationException.requireNonNull(store, "store"));
  }

  /**
   * Acquires {@code name}, waiting with exponential back-off and jitter while someone else holds
   * it. Returns within {@code maxWait} (at least 100 ms) of the call, on the provider's
   * {@linkplain Builder#ticker ticker}, when the store does not answer at all: the store calls
   * run on the provider's own threads, and a lock granted after the caller gave up is released at
   * once (the calling thread must still get a processor to return). A store that answers slowly
   * can add up to 100 ms for the last attempt and 1 s to read the holder for the exception.
   *
   * @throws LockTimeoutException if {@code maxWait} passed without acquiring it, or the store did
   *     not answer in time; names the lock, the wait and the current holder if known
   * @throws dev.sluice.SluiceException if interrupted while waiting (the interrupt flag is kept)
   */
  Lock acquire(String name, Duration maxWait);

  /** One attempt: the lock, or empty if someone else holds it. */
  Optional<Lock> tryAcquire(String name);

  /**
   * One attempt at a {@link TimedLock}: a lock that is not extended in the background and
   * expires {@code atMostFor} after the store granted it, and that a release keeps taken until
   * {@code atLeastFor} has passed (the model of scheduled jobs; ShedLock's {@code lockAtMostFor}
   * and {@code lockAtLeastFor}). Unlike {@link Builder#leaseDuration}, any {@code atMostFor} of
   * at least 1 ms is accepted: nothing has to renew it. The token and the store's clock work as
   * for every lock.
   *
   * @return the lock, or empty if someone else holds it
   * @throws dev.sluice.ConfigurationException if {@code atMostFor} is under 1 ms, or {@code
   *     atLeastFor} is negative or above {@code atMostFor}
   */
  Optional<TimedLock> tryAcquireFor(String name, Duration atMostFor, Duration atLeastFor);

  /**
   * Releases every lock this provider still holds and stops extending them. Idempotent. The locks
   * are released side by side, each store call within its bound (a third of its lease, at least
   * 1 s, at most the store's operation timeout; docs/adr/0101), so close returns within one such
   * bound even when the store does not answer, and never later than the provider's lease
   * duration: a lock whose release has not got through by then expires on the store.
   */
  @Override
  void close();

  /** The default {@link Builder#leaseDuration}. */
  Duration DEFAULT_LEASE_DURATION = Duration.ofSeconds(30);

  /** The default {@link Builder#namePrefix}. */
  String DEFAULT_NAME_PREFIX = "lock:";

  /** Configuration of a {@link LockProvider}; every setter rejects bad values at once. */
  final class Builder {
    private final LeaseStore store;
    private Duration leaseDuration = DEFAULT_LEASE_DURATION;
    private Duration extendEvery;
    private Duration initialBackoff = Duration.ofMillis(50);
    private Duration maxBackoff = Duration.ofSeconds(1);
    private Ticker ticker = Ticker.system();
    private LockLostListener onLost;
    private String namePrefix = DEFAULT_NAME_PREFIX;
    private String ownerLabel;

    private Builder(LeaseStore store) {
      this.store = store;
    }

    /**
     * How long a lock outlives its holder's last extension: the time others wait after a holder
     * crashed. Default 30 s. At least 100 ms.
     */
    public Builder leaseDuration(Duration leaseDuration) {
      ConfigurationException.requireNonNull(leaseDuration, "leaseDuration");
      ConfigurationException.require(leaseDuration.compareTo(Duration.ofMillis(100)) >= 0,
          "leaseDuration", leaseDuration, "must be at least 100 ms");
      this.leaseDuration = leaseDuration;
      return this;
    }

    /**
     * How often a held lock is extended. Must be positive and at most a third of the lease
     * duration, so two extensions can fail in a row (a store fail-over, a GC pause) and a third
     * still comes in time. Default: a third of the lease.
     */
    public Builder extendEvery(Duration extendEvery) {
      ConfigurationException.requireNonNull(extendEvery, "extendEvery");
      ConfigurationException.require(!extendEvery.isNegative() && !extendEvery.isZero(),
          "extendEvery", extendEvery, "must be positive");
      this.extendEvery = extendEvery;
      return this;
    }

    /**
     * Back-off between attempts of {@link LockProvider#acquire}: starts at {@code initial},
     * doubles up to {@code max}; each wait is drawn at random from the upper half of the current
     * back-off so that waiters do not retry in lock-step. Defaults 50 ms and 1 s.
     */
    public Builder backoff(Duration initial, Duration max) {
      ConfigurationException.requireNonNull(initial, "backoff.initial");
      ConfigurationException.requireNonNull(max, "backoff.max");
      ConfigurationException.require(initial.toMillis() >= 1, "backoff.initial", initial,
          "must be at least 1 ms");
      ConfigurationException.require(max.compareTo(initial) >= 0, "backoff.max", max,
          "must be at least backoff.initial (" + initial + ")");
      this.initialBackoff = initial;
      this.maxBackoff = max;
      return this;
    }

    /**
     * The monotonic time source for elapsed time: acquire deadlines, and how long the last
     * extension keeps the lock valid for this holder. The lock reads no wall clock at all; expiry
     * is judged on the store's clock. Default {@link Ticker#system()}.
     */
    public Builder ticker(Ticker ticker) {
      this.ticker = ConfigurationException.requireNonNull(ticker, "ticker");
      return this;
    }

    /** Called when a held lock is lost. Default: log a warning. */
    public Builder onLost(LockLostListener onLost) {
      this.onLost = ConfigurationException.requireNonNull(onLost, "onLost");
      return this;
    }

    /**
     * Prefix of the lease names, keeping locks apart from listener leases ({@code stream#partition})
     * in the same store. Default {@code lock:}.
     */
    public Builder namePrefix(String namePrefix) {
      ConfigurationException.requireNonNull(namePrefix, "namePrefix");
      ConfigurationException.require(!namePrefix.isBlank(), "namePrefix", "'" + namePrefix + "'",
          "must not be blank");
      this.namePrefix = namePrefix;
      return this;
    }

    /**
     * A label for people, shown with the holder in timeouts and status tools (at most 100
     * characters, no {@code /}). It is not the identity: the store compares {@code
     * label/pid@host/random#n}, unique to this provider and acquisition, so two providers given
     * the same label (two instances of one service) still exclude each other. Default: no label.
     */
    public Builder ownerLabel(String ownerLabel) {
      this.ownerLabel = OwnerId.validLabel(ownerLabel, "ownerLabel");
      return this;
    }

    /**
     * Former name of {@link #ownerLabel}: the value was never the identity the store compares.
     *
     * @deprecated use {@link #ownerLabel}
     */
    @Deprecated
    public Builder ownerId(String ownerId) {
      this.ownerLabel = OwnerId.validLabel(ownerId, "ownerId");
      return this;
    }

    /** Validates the combination and builds the provider. */
    public LockProvider build() {
      Duration every = extendEvery != null ? extendEvery : leaseDuration.dividedBy(3);
      ConfigurationException.require(every.multipliedBy(3).compareTo(leaseDuration) <= 0,
          "extendEvery", every, "must be at most a third of leaseDuration " + leaseDuration
              + " so that two extensions can fail in a row without losing the lock");
      return new LeaseLockProvider(store, leaseDuration, every, initialBackoff, maxBackoff, ticker,
          onLost, namePrefix, ownerLabel);
    }
  }
}
