package dev.sluice.jdbc.lock;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.lock.LockTestBackend;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * The SQL backend of the multi-JVM lock tests: argument = JDBC URL. The fenced target is a row
 * updated with {@code WHERE fence < ?}, the way docs/locks.md tells applications to do it.
 */
public final class SqlLockTestBackend implements LockTestBackend {
  private HikariDataSource dataSource;
  private SqlLeaseStore store;

  public SqlLockTestBackend() {}

  @Override
  public LockTestBackend open(String jdbcUrl) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(6);
    config.setMinimumIdle(0);
    dataSource = new HikariDataSource(config);
    store = SqlLeaseStore.builder(dataSource).table("lock_fuzz").build();
    try (Connection c = dataSource.getConnection(); Statement st = c.createStatement()) {
      st.execute("CREATE TABLE IF NOT EXISTS fenced_resource (id VARCHAR(200) PRIMARY KEY,"
          + " fence BIGINT NOT NULL, val VARCHAR(200))");
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return this;
  }

  @Override
  public LeaseStore leaseStore() {
    return store;
  }

  @Override
  public boolean fencedWrite(String resource, long token, String value) {
    try (Connection c = dataSource.getConnection()) {
      try (PreparedStatement ps = c.prepareStatement(
          "INSERT INTO fenced_resource (id, fence, val) VALUES (?, 0, NULL)")) {
        ps.setString(1, resource);
        ps.executeUpdate();
      } catch (SQLException exists) {
        // duplicate key: the resource row exists already
      }
      try (PreparedStatement ps = c.prepareStatement(
          "UPDATE fenced_resource SET fence = ?, val = ? WHERE id = ? AND fence < ?")) {
        ps.setLong(1, token);
        ps.setString(2, value);
        ps.setString(3, resource);
        ps.setLong(4, token);
        return ps.executeUpdate() == 1;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public String read(String resource) {
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(
        "SELECT fence, val FROM fenced_resource WHERE id = ?")) {
      ps.setString(1, resource);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() ? rs.getLong(1) + "=" + rs.getString(2) : null;
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    if (dataSource != null) {
      dataSource.close();
    }
  }
}
