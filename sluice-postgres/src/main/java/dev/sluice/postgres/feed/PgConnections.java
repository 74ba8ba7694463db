package dev.sluice.postgres.feed;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;
import org.postgresql.PGProperty;

/**
 * The connections a PostgreSQL feed opens, each with the settings its job needs: plain ones (slot
 * management, catalog), replication ones ({@code replication=database}, to the replication URL,
 * ADR 0107), the stream's (its sockets watched by {@link ReplicationSockets}, ADR 0106), and the
 * snapshot's (values as the server's text, as pgoutput sends them). Every one prints values as
 * {@link PgValues} reads them (ADR 0090).
 */
final class PgConnections {
  private final String url;
  private final String replicationUrl;
  private final String user;
  private final String password;
  private final String stream;
  private final Duration replicationTimeout;

  PgConnections(String url, String replicationUrl, String user, String password, String stream,
      Duration replicationTimeout) {
    this.url = url;
    this.replicationUrl = replicationUrl;
    this.user = user;
    this.password = password;
    this.stream = stream;
    this.replicationTimeout = replicationTimeout;
  }

  /**
   * A new connection; for replication ({@code replication=database}, to the replication URL)
   * when asked: the one that creates a slot with a snapshot (a stream's is {@link
   * #connectForReplication}).
   */
  Connection connect(boolean replication) throws SQLException {
    Properties p = properties(60, "sluice " + stream);
    if (replication) {
      PGProperty.REPLICATION.set(p, "database");
      PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "10");
      PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    }
    return withOutputSettings(DriverManager.getConnection(replication ? replicationUrl : url, p));
  }

  /**
   * A new replication connection ({@code replication=database}) to the replication URL, its
   * sockets made by {@link ReplicationSockets} with {@code token}, so that the time bytes last
   * arrived is known; its socket timeout is the replication timeout (ADR 0106).
   */
  Connection connectForReplication(String token) throws SQLException {
    Properties p = properties((int) Math.max(1, (replicationTimeout.toMillis() + 999) / 1000), "sluice " + stream);
    PGProperty.REPLICATION.set(p, "database");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "10");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    PGProperty.SOCKET_FACTORY.set(p, ReplicationSockets.class.getName());
    PGProperty.SOCKET_FACTORY_ARG.set(p, token);
    return withOutputSettings(DriverManager.getConnection(replicationUrl, p));
  }

  /**
   * A plain connection whose results arrive as the server's text (simple query protocol), as
   * pgoutput sends values: snapshot rows then convert exactly as streamed ones.
   */
  Connection connectForSnapshot() throws SQLException {
    Properties p = properties(300, "sluice " + stream + " snapshot");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    return withOutputSettings(DriverManager.getConnection(url, p));
  }

  /**
   * Sets what decides the text of values in the session (the walsender prints pgoutput's values
   * with its session's settings, which a database or role setting may change): bytea in hex, and
   * intervals in the {@code postgres} style, the forms {@link PgValues} reads (ADR 0090).
   */
  private static Connection withOutputSettings(Connection c) throws SQLException {
    try (Statement s = c.createStatement()) {
      s.execute("SET bytea_output = 'hex'; SET IntervalStyle = 'postgres'");
    } catch (SQLException e) {
      c.close();
      throw e;
    }
    return c;
  }

  /** The credentials, a 10 s connect timeout, {@code socketTimeoutSeconds} and the application name. */
  private Properties properties(int socketTimeoutSeconds, String applicationName) {
    Properties p = new Properties();
    PGProperty.USER.set(p, user);
    if (password != null) {
      PGProperty.PASSWORD.set(p, password);
    }
    PGProperty.CONNECT_TIMEOUT.set(p, 10);
    PGProperty.SOCKET_TIMEOUT.set(p, socketTimeoutSeconds);
    PGProperty.APPLICATION_NAME.set(p, applicationName);
    return p;
  }
}
