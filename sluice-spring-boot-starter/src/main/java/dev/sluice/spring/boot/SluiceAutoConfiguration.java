package dev.sluice.spring.boot;

import dev.sluice.lease.LeaseStore;
import dev.sluice.lock.LockProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;

/**
 * Sluice in a Spring Boot application: the {@code sluice.*} properties, the {@link LockProvider}
 * on the lease store, and the declared listeners as {@link SluiceListenerContainer} beans
 * ({@link SluiceListener} methods and {@code sluice.listeners.<name>} entries). The lease store
 * itself comes from {@link SluiceMongoAutoConfiguration} or {@link SluiceJdbcAutoConfiguration},
 * unless the application defines a {@link LeaseStore} bean. Every bean here backs off when the
 * application defines its own.
 */
@AutoConfiguration(after = {SluiceMongoAutoConfiguration.class, SluiceJdbcAutoConfiguration.class})
@EnableConfigurationProperties(SluiceProperties.class)
public class SluiceAutoConfiguration {

  /** Locks with fencing tokens on the lease store; closed with the context (held locks are released). */
  @Bean
  @ConditionalOnBean(LeaseStore.class)
  @ConditionalOnMissingBean(LockProvider.class)
  @ConditionalOnProperty(prefix = "sluice.lock", name = "enabled", havingValue = "true", matchIfMissing = true)
  public LockProvider sluiceLockProvider(LeaseStore store, SluiceProperties properties, Environment env) {
    SluiceProperties.Lock l = properties.getLock();
    return Wrapped.configuration("sluice.lock", () -> {
      LockProvider.Builder b = LockProvider.on(store).leaseDuration(l.getLeaseDuration()).namePrefix(l.getNamePrefix());
      if (l.getExtendEvery() != null) {
        b.extendEvery(l.getExtendEvery());
      }
      String owner = SluiceListenerRegistrar.ownerLabel(properties, env);
      if (owner != null) {
        b.ownerLabel(owner);
      }
      return b.build();
    });
  }

  /** The declared listeners of this context. */
  @Bean
  @ConditionalOnMissingBean
  public SluiceListeners sluiceListeners() {
    return new SluiceListeners();
  }

  /** Static: a post-processor, created before the other beans. */
  @Bean
  static SluiceListenerRegistrar sluiceListenerRegistrar() {
    return new SluiceListenerRegistrar();
  }
}
