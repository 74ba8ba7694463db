package dev.sluice.spring.boot.actuate;

import dev.sluice.lease.LeaseStore;
import dev.sluice.spring.boot.SluiceListeners;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.springframework.boot.actuate.health.CompositeHealthContributor;
import org.springframework.boot.actuate.health.HealthContributor;
import org.springframework.boot.actuate.health.NamedContributor;

/**
 * Health {@code sluice}: {@code leaseStore} (the store answers) and one entry per listener of this
 * context ({@link ListenerHealthIndicator}). Read at each request, so listeners registered after
 * this bean was created are included.
 */
public final class SluiceHealthContributor implements CompositeHealthContributor {
  /** The name of the lease store's entry. */
  public static final String LEASE_STORE = "leaseStore";

  private final LeaseStore store;
  private final SluiceListeners listeners;
  private final Duration timeout;
  private final Duration lagThreshold;

  public SluiceHealthContributor(LeaseStore store, SluiceListeners listeners, Duration timeout, Duration lagThreshold) {
    this.store = store;
    this.listeners = listeners;
    this.timeout = timeout;
    this.lagThreshold = lagThreshold;
  }

  @Override
  public HealthContributor getContributor(String name) {
    if (LEASE_STORE.equals(name)) {
      return new LeaseStoreHealthIndicator(store, timeout);
    }
    return listeners.get(name).map(c -> (HealthContributor) new ListenerHealthIndicator(c, lagThreshold))
        .orElse(null);
  }

  @Override
  public Iterator<NamedContributor<HealthContributor>> iterator() {
    List<NamedContributor<HealthContributor>> all = new ArrayList<>();
    all.add(NamedContributor.of(LEASE_STORE, new LeaseStoreHealthIndicator(store, timeout)));
    listeners.all().forEach(c -> all.add(NamedContributor.of(c.name(), new ListenerHealthIndicator(c, lagThreshold))));
    return all.iterator();
  }
}
