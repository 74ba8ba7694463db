package dev.sluice.jdbc.inbox;

import dev.sluice.ConfigurationException;
import java.sql.Connection;
import java.time.Clock;
import java.time.Instant;
import java.util.regex.Pattern;
import javax.sql.DataSource;

/**
 * The consumer side of at-least-once delivery on a SQL database (PostgreSQL, MariaDB/MySQL):
 * a table of processed message ids with a unique key, and "process if new" in one transaction
 * that also holds the consumer's own writes.
 *
 * <p>{@link #processIfNew} opens a transaction, inserts {@code (consumer_group, message_id)}
 * ignoring a conflict, and runs the work on the same connection only if the row was new; then
 * commits. The unique key makes a concurrent consumer with the same id wait for the first
 * transaction: if it commits, the second sees a duplicate; if it rolls back, the second
 * processes. So the consumer's database writes happen exactly once per id, even with competing
 * consumers and redeliveries.
 *
 * <pre>{@code
 * JdbcInbox inbox = JdbcInbox.builder(dataSource).consumerGroup("billing").build();
 * inbox.createTable();
 * inbox.processIfNew(envelope.id(), connection -> charge(connection, envelope.event()));
 * }</pre>
 */
public interface JdbcInbox {

  /** The consumer's work, on the inbox's connection and transaction; must not commit. */
  @FunctionalInterface
  interface Work {
    void run(Connection connection) throws Exception;
  }

  /**
   * Runs {@code work} in the same transaction as recording {@code messageId}, unless it was
   * recorded before.
   *
   * @return true if the work ran and committed now; false for a duplicate
   * @throws InboxException if the work or the database failed (everything is rolled back)
   */
  boolean processIfNew(String messageId, Work work);

  /** Whether {@code messageId} is recorded for this consumer group. */
  boolean processed(String messageId);

  /** Deletes records of ids processed before {@code cutoff}; returns how many. */
  long purgeProcessedBefore(Instant cutoff);

  /** Creates the table and its index if they do not exist. */
  void createTable();

  static Builder builder(DataSource dataSource) {
    return new Builder(dataSource);
  }

  /** Builder; every setter validates. */
  final class Builder {
    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");
    private final DataSource dataSource;
    private String table = "sluice_inbox";
    private String consumerGroup = "default";
    private Clock clock = Clock.systemUTC();

    private Builder(DataSource dataSource) {
      this.dataSource = ConfigurationException.requireNonNull(dataSource, "dataSource");
    }

    /** Table name (a plain SQL identifier); default {@code sluice_inbox}. */
    public Builder table(String table) {
      ConfigurationException.requireNonNull(table, "table");
      ConfigurationException.require(
          IDENTIFIER.matcher(table).matches(), "table", "'" + table + "'", "must be a plain SQL identifier");
      this.table = table;
      return this;
    }

    /** Which consumer the ids belong to: each group processes every message once. */
    public Builder consumerGroup(String consumerGroup) {
      ConfigurationException.requireNonNull(consumerGroup, "consumerGroup");
      ConfigurationException.require(
          !consumerGroup.isBlank() && consumerGroup.length() <= 200,
          "consumerGroup", "'" + consumerGroup + "'", "must be 1..200 characters");
      this.consumerGroup = consumerGroup;
      return this;
    }

    public Builder clock(Clock clock) {
      this.clock = ConfigurationException.requireNonNull(clock, "clock");
      return this;
    }

    public JdbcInbox build() {
      return new JdbcInboxImpl(dataSource, table, consumerGroup, clock);
    }
  }
}
