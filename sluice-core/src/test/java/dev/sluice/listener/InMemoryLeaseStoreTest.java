package dev.sluice.listener;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.feed.Position;
import dev.sluice.lease.Lease;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import org.junit.jupiter.api.Test;

/**
 * The engine tests' reference store keeps the SPI's deletion rules, so that the engine is never
 * tested against semantics the real stores (LeaseStoreContract) do not have.
 */
class InMemoryLeaseStoreTest {
  private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");
  private static final Duration LEASE = Duration.ofSeconds(10);

  @Test
  void deleteIsFencedAndEpochsNeverRepeatAfterADeletion() {
    InMemoryLeaseStore store = new InMemoryLeaseStore(Clock.fixed(T0, ZoneOffset.UTC));
    Lease first = store.tryAcquire("n", "a", LEASE).orElseThrow();
    Lease second = store.tryAcquire("n", "a", LEASE).orElseThrow();

    assertThat(store.delete(first)).isFalse();
    assertThat(store.delete(new Lease("n", "b", second.epoch(), second.expiresAt(), null)))
        .isFalse();
    assertThat(store.delete(second)).isTrue();
    assertThat(store.read("n")).isEmpty();

    Lease third = store.tryAcquire("n", "b", LEASE).orElseThrow();
    assertThat(third.epoch()).isGreaterThan(second.epoch());
  }

  @Test
  void deleteIfIdleDeletesOnlyAReleasedOrExpiredRecordAtTheEpochGiven() {
    InMemoryLeaseStore now = new InMemoryLeaseStore(Clock.fixed(T0, ZoneOffset.UTC));
    Lease held = now.commit(now.tryAcquire("n", "a", LEASE).orElseThrow(),
        new Position("p", T0));
    assertThat(now.deleteIfIdle("n", held.epoch())).as("held").isFalse();
    assertThat(now.read("n").orElseThrow().checkpoint()).isEqualTo(new Position("p", T0));

    assertThat(now.release(held)).isTrue();
    assertThat(now.deleteIfIdle("n", held.epoch() - 1)).as("other epoch").isFalse();
    assertThat(now.deleteIfIdle("n", held.epoch())).as("released").isTrue();
    Lease again = now.tryAcquire("n", "a", LEASE).orElseThrow();
    assertThat(again.epoch()).isGreaterThan(held.epoch());
  }

  @Test
  void deleteIfIdleDeletesALeaseOnceItExpiredOnTheStoresClock() {
    Instant[] time = {T0};
    Clock clock = new Clock() {
      @Override
      public Instant instant() {
        return time[0];
      }

      @Override
      public java.time.ZoneId getZone() {
        return ZoneOffset.UTC;
      }

      @Override
      public Clock withZone(java.time.ZoneId zone) {
        return this;
      }
    };
    InMemoryLeaseStore store = new InMemoryLeaseStore(clock);
    Lease lease = store.tryAcquire("n", "a", LEASE).orElseThrow();
    time[0] = lease.expiresAt().minusMillis(1);
    assertThat(store.deleteIfIdle("n", lease.epoch())).as("still held").isFalse();

    time[0] = lease.expiresAt();
    assertThat(store.deleteIfIdle("n", lease.epoch())).as("expired").isTrue();
    assertThat(store.read("n")).isEmpty();
  }
}
