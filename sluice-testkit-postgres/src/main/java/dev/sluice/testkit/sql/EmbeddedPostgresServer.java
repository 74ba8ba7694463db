package dev.sluice.testkit.sql;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.sql.DataSource;

/**
 * A real PostgreSQL 17 server (zonky binaries) for tests and the demo, configured for durability
 * and logical decoding: {@code fsync=on}, {@code synchronous_commit=on} (the library's defaults
 * turn both off, and then a kill -9 loses committed rows), {@code wal_level=logical}, replication
 * slots and WAL senders. It can be crashed (kill -9 of the postmaster) and started again on the
 * same data directory and port.
 *
 * <p>Tests share one server per JVM through {@link #shared()} and isolate themselves by database
 * or table name; the shared server stops when the JVM exits.
 */
public final class EmbeddedPostgresServer implements AutoCloseable {
  private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]{0,62}");
  public static final String USER = "postgres";
  private static EmbeddedPostgresServer shared;

  private final Path dataDir;
  private final PooledDataSources pools = new PooledDataSources();
  private volatile EmbeddedPostgres postgres;
  private int port;

  private final java.util.Map<String, String> settings;

  private EmbeddedPostgresServer(Path dataDir, java.util.Map<String, String> settings) {
    this.dataDir = dataDir;
    this.settings = java.util.Map.copyOf(settings);
  }

  /** Starts a new server in a fresh temporary data directory. */
  public static EmbeddedPostgresServer start() {
    return start(java.util.Map.of());
  }

  /**
   * Starts a new server whose configuration differs from the usual one by {@code settings}
   * ({@code postgresql.conf} names and values), for tests of a server set up otherwise, e.g.
   * {@code wal_level=replica}.
   */
  public static EmbeddedPostgresServer start(java.util.Map<String, String> settings) {
    try {
      EmbeddedPostgresServer server =
          new EmbeddedPostgresServer(Files.createTempDirectory("sluice-pg-"), settings);
      server.startOnDataDir();
      return server;
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot create a data directory for PostgreSQL", e);
    }
  }

  /** The server shared by every test of this JVM, started on first use. */
  public static synchronized EmbeddedPostgresServer shared() {
    if (shared == null) {
      shared = start();
      EmbeddedPostgresServer s = shared;
      Runtime.getRuntime().addShutdownHook(new Thread(s::close, "sluice-pg-shutdown"));
    }
    return shared;
  }

  private void startOnDataDir() {
    try {
      // Never "clean": zonky's close() deletes a clean-mode data directory, which would turn a
      // crash-and-restart into a fresh empty cluster. initdb still runs on an empty directory;
      // close() below deletes the directory when the server is done for good.
      EmbeddedPostgres.Builder b = EmbeddedPostgres.builder()
          .setDataDirectory(dataDir)
          .setCleanDataDirectory(false)
          .setServerConfig("fsync", "on")
          .setServerConfig("synchronous_commit", "on")
          .setServerConfig("full_page_writes", "on")
          .setServerConfig("wal_level", "logical")
          .setServerConfig("max_replication_slots", "32")
          .setServerConfig("max_wal_senders", "32")
          .setServerConfig("max_connections", "200");
      settings.forEach(b::setServerConfig);
      if (port != 0) {
        b.setPort(port);
      }
      postgres = b.start();
      port = postgres.getPort();
    } catch (IOException e) {
      throw new IllegalStateException("Cannot start embedded PostgreSQL in " + dataDir, e);
    }
  }

  public int port() {
    return port;
  }

  public Path dataDirectory() {
    return dataDir;
  }

  /** JDBC URL of {@code database} (created by {@link #createDatabase} or {@code postgres}). */
  public String jdbcUrl(String database) {
    return "jdbc:postgresql://localhost:" + port + "/" + database + "?user=" + USER;
  }

  /** Creates {@code database} if it does not exist yet; returns its name. */
  public String createDatabase(String database) {
    if (!IDENTIFIER.matcher(database).matches()) {
      throw new IllegalArgumentException("database must be a lower-case SQL identifier: " + database);
    }
    try (Connection c = postgres.getPostgresDatabase().getConnection();
        Statement st = c.createStatement()) {
      try (ResultSet rs = st.executeQuery(
          "SELECT 1 FROM pg_database WHERE datname = '" + database + "'")) {
        if (rs.next()) {
          return database;
        }
      }
      st.execute("CREATE DATABASE " + database);
      return database;
    } catch (SQLException e) {
      throw new IllegalStateException("Cannot create database " + database, e);
    }
  }

  /**
   * Drops the replication slots of {@code database}, ending their readers first, so that tests on
   * the shared server do not use up {@code max_replication_slots} or keep WAL for slots no one
   * reads. Waits (at most 30 s) for the ended readers to let go of their slots.
   */
  public void dropReplicationSlots(String database) {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    try (Connection c = postgres.getPostgresDatabase().getConnection(); Statement st = c.createStatement()) {
      while (true) {
        st.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots"
            + " WHERE database = '" + database + "' AND active_pid IS NOT NULL");
        st.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            + " WHERE database = '" + database + "' AND NOT active");
        try (ResultSet rs = st.executeQuery("SELECT count(*) FROM pg_replication_slots"
            + " WHERE database = '" + database + "'")) {
          rs.next();
          if (rs.getLong(1) == 0) {
            return;
          }
        }
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("replication slots of " + database + " still in use after 30 s");
        }
        java.util.concurrent.locks.LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50)); // poll interval
      }
    } catch (SQLException e) {
      throw new IllegalStateException("Cannot drop the replication slots of " + database, e);
    }
  }

  /** A pooled DataSource for {@code database} (created if missing). Closed with the server. */
  public DataSource dataSource(String database) {
    createDatabase(database);
    return pools.get(jdbcUrl(database), USER, "", "pg-" + database);
  }

  /** Stops the server cleanly and starts it again on the same data directory and port. */
  public void restart() {
    pools.close();
    closeHandle();
    startOnDataDir();
  }

  /**
   * Kills the postmaster with SIGKILL (no shutdown checkpoint: recovery replays the WAL), then
   * starts a new server on the same data directory and port.
   */
  public void crashAndRestart() {
    pools.close();
    long pid = postmasterPid();
    ProcessHandle.of(pid).ifPresent(p -> {
      p.destroyForcibly();
      try {
        p.onExit().get(30, TimeUnit.SECONDS);
      } catch (Exception e) {
        throw new IllegalStateException("postmaster " + pid + " survived kill -9", e);
      }
    });
    // The old handle still owns the data directory lock; close it first (it finds no server).
    closeHandle();
    startOnDataDir();
  }

  private long postmasterPid() {
    try {
      List<String> lines = Files.readAllLines(dataDir.resolve("postmaster.pid"));
      return Long.parseLong(lines.get(0).trim());
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot read postmaster.pid in " + dataDir, e);
    }
  }

  private void closeHandle() {
    EmbeddedPostgres p = postgres;
    if (p != null) {
      try {
        p.close();
      } catch (IOException e) {
        // A crashed server leaves nothing to stop; the handle only releases its lock file.
      }
    }
  }

  @Override
  public synchronized void close() {
    pools.close();
    closeHandle();
    postgres = null;
    deleteDataDirectory();
  }

  private void deleteDataDirectory() {
    try (Stream<Path> files = Files.walk(dataDir)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException | UncheckedIOException e) {
      // Temporary directory: left behind at worst.
    }
  }
}
