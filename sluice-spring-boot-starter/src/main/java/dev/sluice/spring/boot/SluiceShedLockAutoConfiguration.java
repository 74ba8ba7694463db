package dev.sluice.spring.boot;

import dev.sluice.lock.LockProvider;
import dev.sluice.shedlock.SluiceShedLockProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * Where the application has {@code sluice-shedlock} (and so ShedLock) on the class path and no
 * ShedLock {@code LockProvider} of its own: ShedLock's provider on the starter's {@link
 * LockProvider}, so {@code @SchedulerLock} runs on Sluice's locks (fencing tokens, the database's
 * clock) with no bean to write. ShedLock's own {@code @EnableSchedulerLock} is still the
 * application's to declare, with its defaults.
 */
@AutoConfiguration(after = SluiceAutoConfiguration.class)
@ConditionalOnClass({SluiceShedLockProvider.class, net.javacrumbs.shedlock.core.LockProvider.class})
public class SluiceShedLockAutoConfiguration {

  /** ShedLock's provider on Sluice's timed locks. */
  @Bean
  @ConditionalOnBean(LockProvider.class)
  @ConditionalOnMissingBean(net.javacrumbs.shedlock.core.LockProvider.class)
  public SluiceShedLockProvider sluiceShedLockProvider(LockProvider locks) {
    return SluiceShedLockProvider.of(locks);
  }
}
