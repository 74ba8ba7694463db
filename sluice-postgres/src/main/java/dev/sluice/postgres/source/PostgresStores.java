package dev.sluice.postgres.source;

import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.jdbc.deadletter.JdbcDeadLetterStore;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.postgres.feed.PostgresDocuments;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The SQL stores of a {@link PostgresBackend}: {@link SqlLeaseStore} and {@link JdbcDeadLetterStore}
 * (rows stored with {@link PostgresDocuments#encode}). A class of its own so that sluice-jdbc, an
 * optional dependency, is loaded only when a store is asked for: the Kafka Connect connector never
 * does, and its plugin holds no sluice-jdbc.
 */
final class PostgresStores {
  private static final String UNDEFINED_TABLE = "42P01";

  private PostgresStores() {}

  /** With {@code sessionLiveness} (null: off) the store's session-liveness bound (ADR 0114). */
  static LeaseStore leaseStore(DataSource dataSource, String table, Duration sessionLiveness) {
    SqlLeaseStore.Builder b = SqlLeaseStore.builder(dataSource).dialect(SqlLeaseStore.Dialect.POSTGRESQL).table(table);
    return (sessionLiveness == null ? b : b.sessionLiveness(sessionLiveness)).build();
  }

  /** The store of {@code table}, created first when {@code create}. */
  static DeadLetterStore<Map<String, Object>> deadLetters(DataSource dataSource, String table, boolean create) {
    JdbcDeadLetterStore<Map<String, Object>> store = JdbcDeadLetterStore.builder(dataSource,
            PostgresDocuments::encode, PostgresDocuments::decode)
        .table(table)
        .build();
    if (create) {
      store.createTable();
    }
    return store;
  }

  /** 0 also when the table does not exist. */
  static long parked(DeadLetterStore<Map<String, Object>> store, String scope) {
    try {
      return ((JdbcDeadLetterStore<Map<String, Object>>) store).count(scope);
    } catch (RuntimeException e) {
      if (e.getCause() instanceof SQLException sql && UNDEFINED_TABLE.equals(sql.getSQLState())) {
        return 0;
      }
      throw e;
    }
  }
}
