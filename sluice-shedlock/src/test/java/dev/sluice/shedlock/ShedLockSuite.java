package dev.sluice.shedlock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.sluice.lease.LeaseRecord;
import dev.sluice.lease.LeaseStore;
import dev.sluice.lock.LockProvider;
import java.util.Optional;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;
import org.junit.jupiter.api.AfterEach;

/**
 * ShedLock's own provider test suite ({@code shedlock-test-support}: mutual exclusion, {@code
 * lockAtMostFor} timeouts, {@code lockAtLeastFor}, extension, and its fuzz test), unchanged, on
 * {@link SluiceShedLockProvider} over a real server; one subclass per backend.
 */
abstract class ShedLockSuite extends AbstractExtensibleLockProviderIntegrationTest {
  private LeaseStore store;
  private LockProvider locks;
  private SluiceShedLockProvider provider;

  /** A store over the backend's shared real server. */
  protected abstract LeaseStore createLeaseStore();

  @Override
  protected ExtensibleLockProvider getLockProvider() {
    if (provider == null) {
      store = createLeaseStore();
      locks = LockProvider.on(store).build();
      provider = SluiceShedLockProvider.of(locks);
    }
    return provider;
  }

  @AfterEach
  void closeSluiceProvider() {
    if (locks != null) {
      locks.close();
    }
  }

  /** Held on the store's clock: what another node trying the lock would find. */
  private Optional<LeaseRecord> record(String lockName) {
    getLockProvider();
    return store.read("lock:" + lockName);
  }

  @Override
  protected void assertLocked(String lockName) {
    assertThat(record(lockName)).as("lease of " + lockName).isPresent()
        .get().satisfies(r -> assertThat(r.isHeld()).as("held: " + r).isTrue());
  }

  @Override
  protected void assertUnlocked(String lockName) {
    assertThat(record(lockName).map(LeaseRecord::isHeld)).as("lease of " + lockName)
        .isNotEqualTo(Optional.of(true));
  }
}
