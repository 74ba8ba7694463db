package dev.sluice.listener;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Failure injection around the in-memory reference store, for the engine's unit tests: commits,
 * listings or acquisitions of partition leases fail with a given exception a given number of times
 * ({@link Integer#MAX_VALUE}: for ever), and {@link #freeze()} holds every call until {@link
 * #thaw()}, as a process stopped by SIGSTOP would (no request reaches the store, those in flight
 * return late).
 */
final class FaultyLeaseStore implements LeaseStore {
  private final LeaseStore delegate;
  private volatile RuntimeException commitFailure;
  private final AtomicInteger commitFailuresLeft = new AtomicInteger();
  private volatile RuntimeException listFailure;
  private final AtomicInteger listFailuresLeft = new AtomicInteger();

  private volatile RuntimeException partitionAcquireFailure;
  private final AtomicInteger partitionAcquireFailuresLeft = new AtomicInteger();

  private final Object gate = new Object();
  private boolean frozen;

  FaultyLeaseStore(LeaseStore delegate) {
    this.delegate = delegate;
  }

  /** Every call from now on waits until {@link #thaw()}. */
  void freeze() {
    synchronized (gate) {
      frozen = true;
    }
  }

  void thaw() {
    synchronized (gate) {
      frozen = false;
      gate.notifyAll();
    }
  }

  private void passGate() {
    synchronized (gate) {
      boolean interrupted = false;
      while (frozen) {
        try {
          gate.wait();
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  void failCommits(RuntimeException failure, int times) {
    commitFailure = failure;
    commitFailuresLeft.set(times);
  }

  void failLists(RuntimeException failure, int times) {
    listFailure = failure;
    listFailuresLeft.set(times);
  }

  /** Acquisitions of partition leases (not of the membership) fail, as a store that refuses them would. */
  void failPartitionAcquisitions(RuntimeException failure, int times) {
    partitionAcquireFailure = failure;
    partitionAcquireFailuresLeft.set(times);
  }

  private static void maybeFail(RuntimeException failure, AtomicInteger left) {
    if (failure != null && left.getAndUpdate(n -> n > 0 ? n - 1 : 0) > 0) {
      throw failure;
    }
  }

  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    passGate();
    if (!name.contains("@member:")) {
      maybeFail(partitionAcquireFailure, partitionAcquireFailuresLeft);
    }
    return delegate.tryAcquire(name, owner, duration);
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    passGate();
    return delegate.renew(lease, duration);
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    passGate();
    maybeFail(commitFailure, commitFailuresLeft);
    return delegate.commit(lease, checkpoint);
  }

  @Override
  public boolean release(Lease lease) {
    passGate();
    return delegate.release(lease);
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    passGate();
    return delegate.read(name);
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    passGate();
    maybeFail(listFailure, listFailuresLeft);
    return delegate.list(prefix);
  }

  @Override
  public Instant now() {
    passGate();
    return delegate.now();
  }

  @Override
  public boolean delete(Lease lease) {
    passGate();
    return delegate.delete(lease);
  }

  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    passGate();
    return delegate.deleteIfIdle(name, epoch);
  }
}
