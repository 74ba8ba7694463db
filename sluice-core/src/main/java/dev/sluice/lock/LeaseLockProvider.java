package dev.sluice.lock;

import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lease.OwnerId;
import dev.sluice.Ticker;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The one lock implementation: a lock is a lease; see {@code docs/adr/0020-locks-are-leases.md}. */
final class LeaseLockProvider implements LockProvider {
  private static final Logger LOG = LoggerFactory.getLogger(LeaseLockProvider.class);
  private static final AtomicInteger PROVIDERS = new AtomicInteger();
  /** Lease names are stored in VARCHAR(255) columns by the SQL store. */
  static final int MAX_LEASE_NAME = 255;
  /** Owners are stored in VARCHAR(255) columns by the SQL store. */
  static final int MAX_OWNER = 255;
  /** The least time {@link #acquire} gives the store to answer one attempt. */
  static final Duration MIN_STORE_WAIT = Duration.ofMillis(100);
  /** The most a timed-out {@link #acquire} waits to read the holder for its message. */
  static final Duration HOLDER_READ_WAIT = Duration.ofSeconds(1);

  final LeaseStore store;
  final Duration leaseDuration;
  final Duration extendEvery;
  private final Duration initialBackoff;
  private final Duration maxBackoff;
  final Ticker ticker;
  private final LockLostListener onLost;
  private final String namePrefix;
  private final String ownerBase;
  private final AtomicLong acquisitions = new AtomicLong();
  final ScheduledThreadPoolExecutor extender;
  /** Runs the store calls of {@link #acquire}, so a store that does not answer cannot hold it. */
  private final ExecutorService acquiring;
  private final Set<Lock> held = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  public LeaseLockProvider(LeaseStore store, Duration leaseDuration, Duration extendEvery,
      Duration initialBackoff, Duration maxBackoff, Ticker ticker, LockLostListener onLost,
      String namePrefix, String ownerLabel) {
    this.store = store;
    this.leaseDuration = leaseDuration;
    this.extendEvery = extendEvery;
    this.initialBackoff = initialBackoff;
    this.maxBackoff = maxBackoff;
    this.ticker = ticker;
    this.onLost = onLost != null ? onLost : (lock, cause) -> LOG.warn(
        "Lock '{}' (token {}) was lost: {}", lock.name(), lock.token(), cause.getMessage());
    this.namePrefix = namePrefix;
    // The label is for people; the identity the store compares is unique to this provider, so
    // two providers given the same label never both hold a lock (docs/locks.md).
    this.ownerBase = OwnerId.unique(ownerLabel);
    // '#' and up to 19 digits of the acquisition number follow; a very long host name could
    // otherwise push the identity past the SQL store's owner column.
    ConfigurationException.require(ownerBase.length() + 20 <= MAX_OWNER, "ownerLabel",
        ownerLabel == null ? "(none)" : "'" + ownerLabel + "'",
        "with this host's pid@host the owner identity '" + ownerBase + "' leaves no room for the"
            + " acquisition number within " + MAX_OWNER + " characters; use a shorter label");
    int n = PROVIDERS.incrementAndGet();
    AtomicInteger threads = new AtomicInteger();
    // One small daemon pool per provider extends all its locks; daemon so a forgotten provider
    // never keeps the JVM alive (its locks then simply expire).
    this.extender = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "sluice-lock-extender-" + n + "-" + threads.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
    AtomicInteger acquirers = new AtomicInteger();
    this.acquiring = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "sluice-lock-acquire-" + n + "-" + acquirers.incrementAndGet());
      t.setDaemon(true);
      return t;
    });
    this.extender.setRemoveOnCancelPolicy(true);
    this.extender.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
  }

  @Override
  public Optional<Lock> tryAcquire(String name) {
    return attempt(name, leaseDuration, true, (lease, sentAt, answeredAt) -> {
      LeaseLock lock = register(new LeaseLock(this, name, lease, sentAt));
      lock.startExtending();
      return lock;
    });
  }

  @Override
  public Optional<TimedLock> tryAcquireFor(String name, Duration atMostFor, Duration atLeastFor) {
    TimedLeaseLock.requireTerms(atMostFor, atLeastFor);
    // A timed lock granted late is still returned, already run out (isHeld() false, no token for
    // ShedLock's task): ShedLock's semantics, which its provider suite checks with terms of 2 ms.
    return attempt(name, atMostFor, false, (lease, sentAt, answeredAt) -> register(
        new TimedLeaseLock(this, name, lease, sentAt, answeredAt, atMostFor, atLeastFor)));
  }

  /** Turns a granted lease into a lock; {@code sentAt} and {@code answeredAt} on the ticker. */
  private interface Grant<L> {
    L lock(Lease lease, long sentAt, long answeredAt);
  }

  /**
   * One store attempt at {@code name} for {@code duration}: the lock, or empty if held, or, with
   * {@code refuseLate}, if the grant arrived after its term had run out here.
   */
  private <L extends Lock> Optional<L> attempt(String name, Duration duration, boolean refuseLate,
      Grant<L> grant) {
    String leaseName = leaseName(name);
    requireOpen();
    // A unique owner per acquisition: two threads of one process must exclude each other too.
    String owner = ownerBase + "#" + acquisitions.incrementAndGet();
    long sentAt = ticker.nanos();
    Optional<Lease> lease = store.tryAcquire(leaseName, owner, duration);
    if (lease.isEmpty()) {
      return Optional.empty();
    }
    long answeredAt = ticker.nanos();
    if (refuseLate && answeredAt - sentAt >= duration.toNanos()) {
      // The grant arrived after the lease had run out on this process's reckoning (a store that
      // took that long to answer, a pause): its keeper could only report it lost at once. Give it
      // back so that nobody waits for its expiry; if the release fails too, it expires there.
      LOG.warn("Lock '{}' was granted {} ms after it was asked for, past its term of {} ms: not"
          + " taken, released", name, (answeredAt - sentAt) / 1_000_000, duration.toMillis());
      releaseQuietly(lease.get());
      return Optional.empty();
    }
    return Optional.of(grant.lock(lease.get(), sentAt, answeredAt));
  }

  private void releaseQuietly(Lease lease) {
    try {
      store.release(lease);
    } catch (RuntimeException e) {
      LOG.debug("Could not release the late grant of '{}'; it expires on the store", lease.name(), e);
    }
  }

  /** Tracks a new lock so that {@link #close} releases it. */
  private <L extends Lock> L register(L lock) {
    held.add(lock);
    if (closed) {
      // Raced with close(): do not leave a lock behind that nobody extends or releases.
      lock.close();
      requireOpen();
    }
    return lock;
  }

  @Override
  public Lock acquire(String name, Duration maxWait) {
    // The wait counts from the call, so the clock is read before anything else: the checks below
    // build their messages eagerly (on the first call in a process, linking the concatenation
    // too), and a starved thread can spend part of the caller's maxWait on them, which was not
    // counted when the deadline was taken after them.
    long calledAt = ticker.nanos();
    ConfigurationException.requireNonNull(maxWait, "maxWait");
    ConfigurationException.require(!maxWait.isNegative(), "maxWait", maxWait,
        "must not be negative");
    String leaseName = leaseName(name);
    requireOpen();
    long deadline = calledAt + maxWait.toNanos();
    boolean answered = false;
    long backoff = initialBackoff.toMillis();
    while (true) {
      // A store that does not answer must not hold the caller past maxWait. Each attempt gets
      // the time left, but at least MIN_STORE_WAIT, so that maxWait = 0 still means one attempt.
      long answerBy = Math.max(deadline, ticker.nanos() + MIN_STORE_WAIT.toNanos());
      Optional<Lock> lock = attemptBefore(name, answerBy);
      if (lock == null) {
        if (!answered) {
          throw new LockTimeoutException(name, maxWait, "the lock store did not answer in time");
        }
        throw timeout(name, leaseName, maxWait); // it answered before: a slow last attempt
      }
      answered = true;
      if (lock.isPresent()) {
        return lock.get();
      }
      // In nanoseconds: rounded down to milliseconds, 0.3 ms left would read as none left and
      // the caller would be told it waited maxWait when it had not quite.
      long leftNanos = deadline - ticker.nanos();
      if (leftNanos <= 0) {
        throw timeout(name, leaseName, maxWait);
      }
      long left = (leftNanos + 999_999) / 1_000_000; // rounded up: the last pause reaches it
      long pause = Math.min(left, ThreadLocalRandom.current().nextLong(backoff / 2, backoff + 1));
      try {
        Thread.sleep(Math.max(1, pause));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new SluiceException("Interrupted while waiting for lock '" + name + "'", e);
      }
      backoff = Math.min(maxBackoff.toMillis(), backoff * 2);
    }
  }

  /**
   * One {@link #tryAcquire} on the acquiring pool, waited for until {@code answerDeadline};
   * {@code null} if the store has not answered by then, in which case a lock the store grants
   * afterwards is released at once: nobody waits for it any more.
   */
  private Optional<Lock> attemptBefore(String name, long answerDeadline) {
    CompletableFuture<Optional<Lock>> attempt;
    try {
      attempt = CompletableFuture.supplyAsync(() -> tryAcquire(name), acquiring);
    } catch (RejectedExecutionException e) {
      requireOpen(); // closed meanwhile
      throw e;
    }
    try {
      return attempt.get(Math.max(0, answerDeadline - ticker.nanos()), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      abandon(attempt, name);
      return null;
    } catch (InterruptedException e) {
      abandon(attempt, name);
      Thread.currentThread().interrupt();
      throw new SluiceException("Interrupted while waiting for lock '" + name + "'", e);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof RuntimeException r) {
        throw r;
      }
      if (cause instanceof Error err) {
        throw err;
      }
      throw new SluiceException("Acquiring lock '" + name + "' failed: " + cause, cause);
    }
  }

  private static void abandon(CompletableFuture<Optional<Lock>> attempt, String name) {
    attempt.whenComplete((lock, error) -> {
      if (lock != null && lock.isPresent()) {
        LOG.info("Lock '{}' was granted after its caller stopped waiting; releasing it", name);
        lock.get().close();
      } else if (error != null) {
        LOG.debug("An abandoned attempt at lock '{}' failed: {}", name, error.toString());
      }
    });
  }

  private LockTimeoutException timeout(String name, String leaseName, Duration maxWait) {
    Optional<LeaseRecord> record;
    try {
      // For the message only: the store answered this wait's attempts, but never wait long.
      record = CompletableFuture.supplyAsync(() -> store.read(leaseName), acquiring)
          .get(HOLDER_READ_WAIT.toNanos(), TimeUnit.NANOSECONDS)
          .filter(LeaseRecord::isHeld);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      record = Optional.empty();
    } catch (ExecutionException | TimeoutException | RejectedExecutionException e) {
      LOG.debug("Could not read the holder of lock '{}' for the timeout message", name, e);
      record = Optional.empty();
    }
    return record
        .map(r -> new LockTimeoutException(name, maxWait, r.owner(), r.epoch(), r.expiresAt()))
        .orElseGet(() -> new LockTimeoutException(name, maxWait, null, null, null));
  }

  private String leaseName(String name) {
    ConfigurationException.requireNonNull(name, "name");
    ConfigurationException.require(!name.isBlank(), "name", "'" + name + "'",
        "must not be blank");
    ConfigurationException.require(namePrefix.length() + name.length() <= MAX_LEASE_NAME, "name",
        "'" + name + "'", "must be at most " + (MAX_LEASE_NAME - namePrefix.length())
            + " characters");
    return namePrefix + name;
  }

  private void requireOpen() {
    if (closed) {
      throw new SluiceException("LockProvider is closed");
    }
  }

  void forget(Lock lock) {
    held.remove(lock);
  }

  void notifyLost(Lock lock, SluiceException cause) {
    try {
      onLost.lockLost(lock, cause);
    } catch (RuntimeException e) {
      LOG.error("onLost callback for lock '{}' threw", lock.name(), e);
    }
  }

  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    // The locks are released side by side: each release waits at most its own store call's bound
    // (docs/adr/0101), so an unreachable store costs one bound, not one per lock held.
    List<CompletableFuture<Void>> releases = new ArrayList<>();
    for (Lock lock : List.copyOf(held)) {
      try {
        releases.add(CompletableFuture.runAsync(lock::close, acquiring));
      } catch (RejectedExecutionException e) {
        lock.close();
      }
    }
    extender.shutdownNow();
    // Attempts still waiting on the store end on their own; a lock they get is closed by
    // tryAcquire's check of `closed`.
    acquiring.shutdown();
    long deadline = ticker.nanos() + leaseDuration.toNanos();
    try {
      for (CompletableFuture<Void> release : releases) {
        long left = deadline - ticker.nanos();
        release.get(Math.max(0, left), TimeUnit.NANOSECONDS);
      }
      extender.awaitTermination(Math.max(0, deadline - ticker.nanos()), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      // Past the lease a release is pointless: the lease has run out on the store by then.
      LOG.warn("Closing the lock provider: releases still waiting on the store after {}; their"
          + " locks expire on the store", leaseDuration);
    } catch (ExecutionException e) {
      LOG.warn("Closing the lock provider: a release failed; that lock expires on the store",
          e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
