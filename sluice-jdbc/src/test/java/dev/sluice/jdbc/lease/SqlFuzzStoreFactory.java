package dev.sluice.jdbc.lease;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lease.LeaseFuzz;
import java.util.List;

/** Builds a {@link SqlLeaseStore} in a {@link LeaseFuzz} JVM: args = JDBC URL, table. */
public final class SqlFuzzStoreFactory implements LeaseFuzz.StoreFactory {

  @Override
  public LeaseStore create(List<String> args) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(args.get(0));
    config.setMaximumPoolSize(8);
    config.setMinimumIdle(0);
    // The pool lives as long as the fuzzing JVM.
    return SqlLeaseStore.builder(new HikariDataSource(config)).table(args.get(1)).build();
  }
}
