package dev.sluice.postgres.source;

import dev.sluice.ConfigurationException;
import dev.sluice.deadletter.DeadLetterStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.source.SourceBackend;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A PostgreSQL database as a {@link SourceBackend}: one feed per table of the publication, each
 * partition reading through a replication slot of its own ({@link PostgresChangeFeed}); leases
 * and parked changes in tables of the same database ({@link PostgresStores}, with sluice-jdbc on
 * the class path), through the front-end's data source (the service's pool). Calls bounded by a duration use connections of their own with that
 * timeout. The service and the Kafka Connect connector both build theirs here (ADR 0128).
 */
public final class PostgresBackend implements SourceBackend<Map<String, Object>> {
  /** The lease table when none is named. */
  public static final String DEFAULT_LEASE_TABLE = "sluice_lease";
  /** The dead-letter table when none is named. */
  public static final String DEFAULT_DEAD_LETTER_TABLE = "sluice_deadletters";

  private final Builder settings;
  private final DataSource stores;
  private volatile boolean deadLetterTableReady;

  private PostgresBackend(Builder settings) {
    this.settings = settings;
    this.stores = settings.stores != null ? settings.stores : dataSource(null, "sluice");
  }

  /** A backend reading {@code publication} on the database of {@code url} as {@code user}. */
  public static Builder builder(String url, String user, String password, String publication) {
    return new Builder(url, user, password, publication);
  }

  @Override
  public String name() {
    return "PostgreSQL";
  }

  @Override
  public String targetKind() {
    return "table";
  }

  /** The publication the feeds read. */
  public String publication() {
    return settings.publication;
  }

  /**
   * The builder of {@code table}'s feed with the backend's settings, for a front-end's own
   * additions; {@code table} the backend's messages stream: a feed of the publication's
   * logical-decoding messages, no rows (ADR 0096).
   */
  public PostgresChangeFeed.Builder feedBuilder(String table) {
    PostgresChangeFeed.Builder b = PostgresChangeFeed.builder(settings.url, settings.user, settings.password,
        settings.publication);
    if (table.equals(settings.messagesStream)) {
      b = b.rows(false).messages(settings.messagePrefixes.toArray(String[]::new));
    } else {
      b = b.table(table);
    }
    b = b.stream(table).failover(settings.failover);
    if (settings.slotPrefix != null) {
      b = b.slotPrefix(settings.slotPrefix);
    }
    if (settings.batchSize != null) {
      b = b.batchSize(settings.batchSize);
    }
    return b;
  }

  @Override
  public PostgresChangeFeed feed(String table) {
    return feedBuilder(table).build();
  }

  /**
   * A data source of the backend's database: the stores' when {@code bound} is null, else one
   * whose connect, login and socket timeouts are {@code bound} (at least 1 s).
   */
  public DataSource dataSource(Duration bound) {
    return bound == null ? stores : dataSource(bound, "sluice health");
  }

  private DataSource dataSource(Duration bound, String applicationName) {
    PGSimpleDataSource ds = new PGSimpleDataSource();
    ds.setURL(settings.url);
    ds.setUser(settings.user);
    if (settings.password != null) {
      ds.setPassword(settings.password);
    }
    if (bound != null) {
      int seconds = (int) Math.max(1, bound.toSeconds());
      ds.setConnectTimeout(seconds);
      ds.setLoginTimeout(seconds);
      ds.setSocketTimeout(seconds);
    }
    ds.setApplicationName(applicationName);
    return ds;
  }

  /** Needs sluice-jdbc on the class path (the service has it). */
  @Override
  public LeaseStore leaseStore(Duration bound) {
    return PostgresStores.leaseStore(dataSource(bound),
        settings.leaseTable == null ? DEFAULT_LEASE_TABLE : settings.leaseTable, settings.sessionLiveness);
  }

  /** Needs sluice-jdbc on the class path (the service has it). */
  @Override
  public DeadLetterStore<Map<String, Object>> deadLetters(Duration bound) {
    DeadLetterStore<Map<String, Object>> store = PostgresStores.deadLetters(dataSource(bound),
        settings.deadLetterTable == null ? DEFAULT_DEAD_LETTER_TABLE : settings.deadLetterTable,
        bound == null && !deadLetterTableReady);
    if (bound == null) {
      deadLetterTableReady = true;
    }
    return store;
  }

  /** 0 also when the table does not exist: it is created when a listener that parks starts. */
  @Override
  public long parked(DeadLetterStore<Map<String, Object>> store, String scope) {
    return PostgresStores.parked(store, scope);
  }

  @Override
  public String json(Map<String, Object> row) {
    return PostgresDocuments.toJson(row).toString();
  }

  /** {@code SELECT 1} on a connection of its own with {@code bound} timeouts. */
  @Override
  public void ping(Duration bound) throws SQLException {
    try (Connection c = dataSource(bound).getConnection(); Statement s = c.createStatement()) {
      s.execute("SELECT 1");
    }
  }

  /** Nothing: the feeds close their connections, and the front-end its data source. */
  @Override
  public void close() {}

  /** The backend's settings; each one left unset keeps the feed's or the store's default. */
  public static final class Builder {
    private final String url;
    private final String user;
    private final String password;
    private final String publication;
    private boolean failover;
    private String slotPrefix;
    private Integer batchSize;
    private String messagesStream;
    private List<String> messagePrefixes = List.of();
    private String leaseTable;
    private String deadLetterTable;
    private DataSource stores;
    private Duration sessionLiveness;

    private Builder(String url, String user, String password, String publication) {
      this.url = ConfigurationException.requireNonNull(url, "url").trim();
      this.user = user;
      this.password = password;
      this.publication = publication;
    }

    /** Whether new slots are failover slots ({@link PostgresChangeFeed.Builder#failover}). */
    public Builder failover(boolean failover) {
      this.failover = failover;
      return this;
    }

    /** Every feed's {@link PostgresChangeFeed.Builder#slotPrefix}. */
    public Builder slotPrefix(String prefix) {
      this.slotPrefix = prefix;
      return this;
    }

    /** Every feed's {@link PostgresChangeFeed.Builder#batchSize}. */
    public Builder batchSize(int size) {
      this.batchSize = size;
      return this;
    }

    /**
     * The stream name that is not a table but the publication's logical-decoding messages whose
     * prefix starts with one of {@code prefixes} (the connector's {@code messages} stream).
     */
    public Builder messagesStream(String stream, List<String> prefixes) {
      this.messagesStream = stream;
      this.messagePrefixes = List.copyOf(prefixes);
      return this;
    }

    /** The lease table; null: {@link #DEFAULT_LEASE_TABLE}. */
    public Builder leaseTable(String table) {
      this.leaseTable = table;
      return this;
    }

    /**
     * The lease store's session-liveness bound (SqlLeaseStore.Builder#sessionLiveness, ADR 0114);
     * null (the default): off.
     */
    public Builder sessionLiveness(Duration bound) {
      this.sessionLiveness = bound;
      return this;
    }

    /** The dead-letter table; null: {@link #DEFAULT_DEAD_LETTER_TABLE}. */
    public Builder deadLetterTable(String table) {
      this.deadLetterTable = table;
      return this;
    }

    /**
     * The data source of the lease and dead-letter stores (the service's connection pool, which
     * the front-end closes); default: connections opened as needed.
     */
    public Builder stores(DataSource dataSource) {
      this.stores = dataSource;
      return this;
    }

    public PostgresBackend build() {
      return new PostgresBackend(this);
    }
  }
}
