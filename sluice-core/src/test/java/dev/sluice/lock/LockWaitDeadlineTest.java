package dev.sluice.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * {@code acquire(name, maxWait)} must not give up before maxWait has passed on its own ticker. It
 * once did when less than a millisecond was left (the time left was rounded down to 0 ms), so a
 * caller was told it had waited 400 ms after 399.7 ms. The ticker here is moved by the store, so
 * the test is exact and does not depend on the machine's speed.
 */
class LockWaitDeadlineTest {
  private static final Duration WAIT = Duration.ofMillis(400);

  @Test
  void lessThanAMillisecondLeftIsStillTimeToTryAgain() {
    AtomicLong now = new AtomicLong();
    AtomicInteger attempts = new AtomicInteger();
    // Always taken. The first attempt leaves 0.3 ms of the wait; every later one takes 1 ms.
    LeaseStore refusing = new RefusingStore(() -> {
      long step = attempts.incrementAndGet() == 1 ? WAIT.toNanos() - 300_000 : 1_000_000;
      now.addAndGet(step);
    });
    try (LockProvider provider = LockProvider.on(refusing).ownerLabel("waiter")
        .ticker(now::get).build()) {
      assertThatThrownBy(() -> provider.acquire("report", WAIT))
          .isInstanceOf(LockTimeoutException.class);
    }
    assertThat(attempts).as("attempts within the 400 ms").hasValue(2);
    assertThat(now.get()).isGreaterThanOrEqualTo(WAIT.toNanos());
  }

  /** A store on which every lock is held by someone else; each attempt runs {@code onAttempt}. */
  private static final class RefusingStore implements LeaseStore {
    private final Runnable onAttempt;

    RefusingStore(Runnable onAttempt) {
      this.onAttempt = onAttempt;
    }

    @Override
    public Optional<Lease> tryAcquire(String name, String owner, Duration duration) {
      onAttempt.run();
      return Optional.empty();
    }

    @Override
    public Lease renew(Lease lease, Duration duration) {
      throw new UnsupportedOperationException("never granted, never renewed");
    }

    @Override
    public Lease commit(Lease lease, Position checkpoint) {
      throw new UnsupportedOperationException("never granted, never committed");
    }

    @Override
    public boolean release(Lease lease) {
      return false;
    }

    @Override
    public Optional<LeaseRecord> read(String name) {
      return Optional.empty();
    }

    @Override
    public List<LeaseRecord> list(String prefix) {
      return List.of();
    }

    @Override
    public Instant now() {
      return Instant.EPOCH;
    }

    @Override
    public boolean delete(Lease lease) {
      return false;
    }

    @Override
    public boolean deleteIfIdle(String name, long epoch) {
      return false;
    }
  }
}
