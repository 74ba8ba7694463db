package dev.sluice.jdbc.deadletter;

import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;
import java.util.function.Function;
import java.util.regex.Pattern;
import javax.sql.DataSource;

/**
 * A {@link DeadLetterStore} in a SQL table (PostgreSQL, MariaDB/MySQL). One row per parked
 * change; the change's documents are stored as text through a codec (for MongoDB documents:
 * {@code BsonDocument::toJson} and {@code BsonDocument::parse}). Order: an auto-increment
 * {@code seq}; idempotence: a unique key on {@code (stream, event_id)}. The change's {@code raw}
 * event is not kept.
 *
 * <pre>{@code
 * JdbcDeadLetterStore<BsonDocument> store = JdbcDeadLetterStore.builder(dataSource,
 *     BsonDocument::toJson, BsonDocument::parse).build();
 * store.createTable();
 * }</pre>
 */
public interface JdbcDeadLetterStore<D> extends DeadLetterStore<D> {

  /** Creates the table if it does not exist. */
  void createTable();

  /** How many changes of {@code stream} are parked. */
  long count(String stream);

  static <D> Builder<D> builder(DataSource dataSource, Function<D, String> encode, Function<String, D> decode) {
    return new Builder<>(dataSource, encode, decode);
  }

  /** Builder; every setter validates. */
  final class Builder<D> {
    private static final Pattern IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_]{0,62}");
    private final DataSource dataSource;
    private final Function<D, String> encode;
    private final Function<String, D> decode;
    private String table = "sluice_deadletters";

    private Builder(DataSource dataSource, Function<D, String> encode, Function<String, D> decode) {
      this.dataSource = ConfigurationException.requireNonNull(dataSource, "dataSource");
      this.encode = ConfigurationException.requireNonNull(encode, "encode");
      this.decode = ConfigurationException.requireNonNull(decode, "decode");
    }

    /** Table name (a plain SQL identifier); default {@code sluice_deadletters}. */
    public Builder<D> table(String table) {
      ConfigurationException.requireNonNull(table, "table");
      ConfigurationException.require(
          IDENTIFIER.matcher(table).matches(), "table", "'" + table + "'", "must be a plain SQL identifier");
      this.table = table;
      return this;
    }

    public JdbcDeadLetterStore<D> build() {
      return new JdbcDeadLetterStoreImpl<>(dataSource, table, encode, decode);
    }
  }
}
