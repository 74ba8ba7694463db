package dev.sluice.spring.boot.actuate;

import dev.sluice.lease.LeaseStore;
import dev.sluice.spring.boot.Bounded;
import java.time.Duration;
import java.time.Instant;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

/**
 * UP when the lease store answers a read of its clock ({@link LeaseStore#now()}) within {@code
 * sluice.health.timeout}; DOWN with the error otherwise. Without the store no partition can be
 * renewed: every listener of this instance loses its partitions within a lease duration.
 */
record LeaseStoreHealthIndicator(LeaseStore store, Duration timeout) implements HealthIndicator {

  @Override
  public Health health() {
    try {
      Instant now = Bounded.call("the lease store", timeout, store::now);
      return Health.up().withDetail("store", store.getClass().getSimpleName())
          .withDetail("storeTime", now.toString()).build();
    } catch (RuntimeException e) {
      return Health.down(e).withDetail("store", store.getClass().getSimpleName()).build();
    }
  }
}
