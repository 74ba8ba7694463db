package dev.sluice.testkit.sql;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One small HikariCP pool per JDBC URL, closed with its server. Shared by the embedded SQL servers
 * of {@code sluice-testkit-postgres} and {@code sluice-testkit-mariadb}, which bring HikariCP (it is
 * optional here, so a MongoDB-only test kit does not carry it; ADR 0124). Public only because those
 * servers are in other jars; not meant for tests.
 */
public final class PooledDataSources implements AutoCloseable {
  private final Map<String, HikariDataSource> pools = new ConcurrentHashMap<>();

  /** The pool for {@code url}, made on first use. */
  public HikariDataSource get(String url, String user, String password, String poolName) {
    return pools.computeIfAbsent(url, u -> {
      HikariConfig config = new HikariConfig();
      config.setJdbcUrl(u);
      config.setUsername(user);
      config.setPassword(password);
      config.setPoolName(poolName);
      config.setMaximumPoolSize(12);
      config.setMinimumIdle(0);
      config.setConnectionTimeout(10_000);
      return new HikariDataSource(config);
    });
  }

  @Override
  public void close() {
    pools.values().forEach(HikariDataSource::close);
    pools.clear();
  }
}
