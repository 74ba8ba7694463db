package dev.sluice.spring.boot.actuate;

import dev.sluice.lease.LeaseStore;
import dev.sluice.spring.boot.SluiceAutoConfiguration;
import dev.sluice.spring.boot.SluiceListeners;
import dev.sluice.spring.boot.SluiceProperties;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.actuate.health.HealthContributor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * Actuator support where spring-boot-actuator is on the class path: health {@code sluice}
 * ({@link SluiceHealthContributor}; {@code management.health.sluice.enabled=false} turns it off) and
 * the {@code sluice} endpoint ({@link SluiceEndpoint}).
 */
@AutoConfiguration(after = SluiceAutoConfiguration.class,
    beforeName = "org.springframework.boot.actuate.autoconfigure.health.HealthEndpointAutoConfiguration")
@ConditionalOnClass(HealthContributor.class)
@ConditionalOnBean({LeaseStore.class, SluiceListeners.class})
public class SluiceActuatorAutoConfiguration {

  @Bean
  @ConditionalOnEnabledHealthIndicator("sluice")
  @ConditionalOnMissingBean(name = "sluiceHealthContributor")
  public SluiceHealthContributor sluiceHealthContributor(LeaseStore store, SluiceListeners listeners,
      SluiceProperties properties) {
    return new SluiceHealthContributor(store, listeners, properties.getHealth().getTimeout(),
        properties.getHealth().getLagThreshold());
  }

  @Bean
  @ConditionalOnAvailableEndpoint
  @ConditionalOnMissingBean
  public SluiceEndpoint sluiceEndpoint(SluiceListeners listeners, LeaseStore store, SluiceProperties properties) {
    return new SluiceEndpoint(listeners, store, properties.getHealth().getTimeout());
  }
}
