package dev.sluice.spring.boot;

import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import javax.sql.DataSource;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;

/**
 * The SQL lease store (PostgreSQL, MariaDB/MySQL) on the application's {@link DataSource}, where
 * sluice-jdbc is on the class path and no other lease store was defined (with {@code
 * sluice.store.type=auto}, a MongoClient bean takes precedence; {@code jdbc} chooses this one).
 * The table {@code sluice.store.jdbc.table} is created on first use unless {@code
 * sluice.store.jdbc.create-table=false}.
 */
@AutoConfiguration(
    after = SluiceMongoAutoConfiguration.class,
    afterName = "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration")
@ConditionalOnClass({SqlLeaseStore.class, DataSource.class})
@ConditionalOnBean(DataSource.class)
@Conditional(OnStoreTypeCondition.Jdbc.class)
@EnableConfigurationProperties(SluiceProperties.class)
public class SluiceJdbcAutoConfiguration {

  @Bean
  @ConditionalOnMissingBean(LeaseStore.class)
  public SqlLeaseStore sluiceLeaseStore(DataSource dataSource, SluiceProperties properties) {
    SluiceProperties.Jdbc j = properties.getStore().getJdbc();
    return Wrapped.configuration("sluice.store.jdbc", () -> {
      SqlLeaseStore.Builder b = SqlLeaseStore.builder(dataSource)
          .table(j.getTable())
          .createTable(j.isCreateTable());
      return (j.getSessionLiveness() == null ? b : b.sessionLiveness(j.getSessionLiveness())).build();
    });
  }
}
