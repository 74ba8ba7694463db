package dev.sluice.app.service;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.sluice.app.cli.Messages;
import dev.sluice.app.service.config.SluiceConfig;
import dev.sluice.app.service.config.SluiceConfig.ListenerSection;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.postgres.feed.PostgresChangeFeed;
import dev.sluice.postgres.feed.PostgresDocuments;
import dev.sluice.postgres.source.PostgresBackend;
import dev.sluice.sink.DocumentMapper;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;

/**
 * A PostgreSQL database: each listener reads one table of the publication through replication
 * slots of its own; leases and parked changes are tables of the same database, created on first
 * use ({@link PostgresBackend}). The stores share one small connection pool, which this class sizes
 * for the file's listeners and closes; readiness and the bounded calls of the HTTP endpoint use
 * connections of their own with 2 s timeouts.
 */
final class PostgresSource implements Source<Map<String, Object>> {
  private final SluiceConfig.PostgresSection config;
  private final HikariDataSource pool;
  private final PostgresBackend backend;

  PostgresSource(SluiceConfig.PostgresSection config, List<ListenerSection> listeners) {
    this.config = config;
    int partitions = listeners.stream()
        .mapToInt(l -> dev.sluice.listener.ListenerSettings.PARTITIONS.orDefault(l.partitions())).sum();
    HikariConfig h = new HikariConfig();
    h.setJdbcUrl(config.url().trim());
    h.setUsername(config.user());
    h.setPassword(config.password());
    h.setPoolName("sluice-postgres");
    // Renewals, commits and parking of every partition may run at once; each listener's release
    // notices (ADR 0061) hold one connection while it runs, and with session liveness (ADR 0114)
    // the process's lease store (one, Wiring#leaseStore) its liveness session one more.
    java.time.Duration session = dev.sluice.app.service.config.ConfigLoader.sessionLiveness(config, "postgres");
    h.setMaximumPoolSize(4 + 2 * partitions + listeners.size() + (session == null ? 0 : 1));
    h.setMinimumIdle(1);
    h.setConnectionTimeout(5_000);
    // A database down at start is waited for by the service, not a failure to build the pool.
    h.setInitializationFailTimeout(-1);
    h.addDataSourceProperty("connectTimeout", "5");
    // A server that keeps the connection and stops answering must fail a call, not hold a thread.
    h.addDataSourceProperty("socketTimeout", "30");
    h.addDataSourceProperty("ApplicationName", "sluice");
    this.pool = new HikariDataSource(h);
    this.backend = PostgresBackend.builder(config.url(), config.user(), config.password(), config.publication())
        .failover(config.failover())
        .leaseTable(config.leaseTable())
        .deadLetterTable(config.deadLetterTable())
        .sessionLiveness(session)
        .stores(pool)
        .build();
  }

  @Override
  public PostgresBackend backend() {
    return backend;
  }

  @Override
  public String describe(ListenerSection l) {
    return "PostgreSQL " + l.table() + " (publication " + config.publication() + ")";
  }

  @Override
  public ChangeFeed<Map<String, Object>> feed(ListenerSection l, String at) {
    return backend.feedBuilder(l.table())
        .messages(l.messagePrefixes().toArray(String[]::new))
        .build();
  }

  /**
   * {@code wal_level}, the publication and its table, checked before any slot is created: what is
   * missing ends the start with the fix named (exit 3), instead of a partition that fails while
   * the process runs on. A server that cannot be reached is retried by the caller.
   */
  @Override
  public void checkReadable(ListenerSection l, String at) {
    try {
      ((PostgresChangeFeed) feed(l, at)).verify();
    } catch (dev.sluice.feed.FeedException e) {
      if (e.retryable()) {
        throw e;
      }
      throw new dev.sluice.ConfigurationException(at + " (table '" + l.table() + "'): "
          + Messages.oneLine(e));
    }
  }

  /** Every row of the table, in primary key order, read 500 at a time (no slot is used). */
  @Override
  public dev.sluice.sink.Replay.Result replayCurrentState(ListenerSection l, String at, String replayId,
      dev.sluice.listener.Handler<Map<String, Object>> handler) {
    PostgresChangeFeed feed = (PostgresChangeFeed) feed(l, at);
    // Replay asks for each document's key right after taking it: the row just handed out has it.
    java.util.concurrent.atomic.AtomicReference<PostgresChangeFeed.CurrentRow> current =
        new java.util.concurrent.atomic.AtomicReference<>();
    Iterable<Map<String, Object>> documents = () -> {
      java.util.Iterator<PostgresChangeFeed.CurrentRow> rows = feed.currentRows(500).iterator();
      return new java.util.Iterator<>() {
        @Override
        public boolean hasNext() {
          return rows.hasNext();
        }

        @Override
        public Map<String, Object> next() {
          PostgresChangeFeed.CurrentRow row = rows.next();
          current.set(row);
          return row.document();
        }
      };
    };
    return dev.sluice.sink.Replay.currentState(feed.stream(), replayId, documents, doc -> current.get().key(),
        doc -> current.get().documentKey(), 500, handler);
  }

  /** {@code sluice.pg.slot.retained.bytes} and {@code sluice.pg.slot.safe.bytes} of the listener's slots. */
  @Override
  public void bindMeters(io.micrometer.core.instrument.MeterRegistry registry,
      dev.sluice.listener.Listener<Map<String, Object>> listener) {
    dev.sluice.postgres.feed.PostgresFeedMetrics.bind(registry, (PostgresChangeFeed) listener.config().feed(),
        listener.config().partitions());
  }

  /**
   * Each partition's slot: whether a reader holds it, its {@code wal_status}, the WAL it keeps
   * ({@code retainedBytes}) and may still keep before the server invalidates it ({@code
   * safeBytes}). A slot that does not exist while the partition has a checkpoint was dropped (by
   * an operator, a tool, or invalidated and dropped): {@code historyLost}, which the partition's
   * {@code onHistoryLost} policy handles when it starts; the slot is not created again behind it.
   */
  @Override
  public List<Map<String, Object>> slots(dev.sluice.listener.Listener<Map<String, Object>> listener,
      List<dev.sluice.lease.LeaseRecord> records) {
    PostgresChangeFeed feed = (PostgresChangeFeed) listener.config().feed();
    int n = listener.config().partitions();
    List<Map<String, Object>> out = new java.util.ArrayList<>();
    for (int i = 0; i < n; i++) {
      dev.sluice.feed.PartitionSpec partition = new dev.sluice.feed.PartitionSpec(i, n);
      Map<String, Object> m = new java.util.LinkedHashMap<>();
      m.put("slot", feed.slotName(partition));
      m.put("partition", i + "/" + n);
      try {
        java.util.Optional<PostgresChangeFeed.SlotStats> stats = feed.slot(partition);
        if (stats.isPresent()) {
          m.put("exists", true);
          m.put("active", stats.get().active());
          m.put("walStatus", stats.get().walStatus());
          m.put("retainedBytes", stats.get().retainedBytes());
          m.put("safeBytes", stats.get().safeBytes());
          m.put("historyLost", "lost".equals(stats.get().walStatus()));
        } else {
          String lease = listener.config().leaseName(partition.index());
          boolean checkpoint = records != null && records.stream()
              .anyMatch(r -> r.name().equals(lease) && r.checkpoint() != null);
          m.put("exists", false);
          m.put("historyLost", checkpoint);
          m.put("note", checkpoint ? "the slot was dropped while the partition has a checkpoint: the changes since"
              + " are lost history, handled by onHistoryLost when the partition starts" : "not created yet");
        }
      } catch (RuntimeException e) {
        m.put("error", Messages.oneLine(e));
      }
      out.add(m);
    }
    return out;
  }

  @Override
  public DocumentMapper<Map<String, Object>> mapper() {
    return PostgresDocuments.mapper();
  }

  /**
   * SQLSTATE class 28 (the password or the user refused) and 3D000 (no such database), found in
   * the cause chain of a failure to connect (the pool reports "request timed out" around it).
   */
  @Override
  public dev.sluice.ConfigurationException refusal(RuntimeException failure) {
    for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        String state = sql.getSQLState();
        if (state.startsWith("28")) {
          return new dev.sluice.ConfigurationException("postgres.password: PostgreSQL refused user '"
              + config.user() + "' or its password (SQLSTATE " + state + "): " + Messages.oneLine(sql)
              + "; check postgres.user and postgres.password (or the password in postgres.url)");
        }
        if (state.equals("3D000")) {
          return new dev.sluice.ConfigurationException("postgres.url: " + Messages.oneLine(sql)
              + " (SQLSTATE 3D000); name an existing database in postgres.url");
        }
      }
    }
    return null;
  }

  /**
   * How long {@link #close()} waits for the pool's connections in use to come back before it closes
   * the pool: a closing listener does not wait for its release watch, which gives its connection
   * back after its current wait for notifications (0.5 s) and an {@code UNLISTEN} (at most 1 s).
   * Within {@link Wiring#CLOSE_BOUND}.
   */
  static final java.time.Duration RETURN_BOUND = java.time.Duration.ofMillis(2_000);

  /**
   * Closes the pool once no connection is in use, or after {@link #RETURN_BOUND}. Closing it under
   * a connection in use aborts that connection: HikariCP then logs "connection marked as broken"
   * with a stack trace when its holder gives it back, which every normal stop did (the release
   * watch's connection). Past the bound, something really is still using the database (a listener
   * left stopping, a server that does not answer), and the abort is what ends it.
   */
  @Override
  public void close() {
    com.zaxxer.hikari.HikariPoolMXBean state = pool.getHikariPoolMXBean();
    long deadline = System.nanoTime() + RETURN_BOUND.toNanos();
    while (state != null && state.getActiveConnections() > 0 && System.nanoTime() < deadline) {
      java.util.concurrent.locks.LockSupport.parkNanos(java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(20));
    }
    backend.close();
    pool.close();
  }
}
