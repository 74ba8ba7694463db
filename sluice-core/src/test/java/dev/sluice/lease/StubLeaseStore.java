package dev.sluice.lease;

import dev.sluice.feed.Position;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * A lease store for unit tests of one collaborator: every operation fails as unused, and a test
 * overrides the few its subject calls, so an unexpected call shows at once.
 */
public abstract class StubLeaseStore implements LeaseStore {
  private static UnsupportedOperationException unused(String operation) {
    return new UnsupportedOperationException(operation + " is not used by this test");
  }

  @Override
  public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
    throw unused("tryAcquire");
  }

  @Override
  public Lease renew(Lease lease, Duration duration) {
    throw unused("renew");
  }

  @Override
  public Lease commit(Lease lease, Position checkpoint) {
    throw unused("commit");
  }

  @Override
  public boolean release(Lease lease) {
    throw unused("release");
  }

  @Override
  public Optional<LeaseRecord> read(String name) {
    throw unused("read");
  }

  @Override
  public List<LeaseRecord> list(String prefix) {
    throw unused("list");
  }

  @Override
  public Instant now() {
    throw unused("now");
  }

  @Override
  public boolean delete(Lease lease) {
    throw unused("delete");
  }

  @Override
  public boolean deleteIfIdle(String name, long epoch) {
    throw unused("deleteIfIdle");
  }
}
