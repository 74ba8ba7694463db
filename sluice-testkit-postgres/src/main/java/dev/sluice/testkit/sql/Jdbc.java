package dev.sluice.testkit.sql;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;

/**
 * Plain JDBC for setting up databases in tests and benchmarks: statements on a connection of their own, and a
 * slot's pgoutput read raw through pgjdbc (the baseline the benchmarks compare the feed with).
 */
public final class Jdbc {
  private Jdbc() {}

  /** Runs {@code statements} in order on one connection to {@code url} (auto-commit: each on its own). */
  public static void execute(String url, String... statements) throws SQLException {
    execute(url, Arrays.asList(statements));
  }

  /** Runs {@code statements} in order on one connection to {@code url} (auto-commit: each on its own). */
  public static void execute(String url, List<String> statements) throws SQLException {
    try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement()) {
      for (String statement : statements) {
        s.execute(statement);
      }
    }
  }

  /** The first column of the first row {@code query} returns, as text. */
  public static String queryOne(String url, String query) throws SQLException {
    try (Connection c = DriverManager.getConnection(url); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery(query)) {
      rs.next();
      return rs.getString(1);
    }
  }

  /**
   * A replication connection ({@code replication=database}, simple query mode) to {@code url} as {@link
   * EmbeddedPostgresServer#USER}.
   */
  public static Connection replicationConnection(String url) throws SQLException {
    Properties p = new Properties();
    PGProperty.USER.set(p, EmbeddedPostgresServer.USER);
    PGProperty.REPLICATION.set(p, "database");
    PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "10");
    PGProperty.PREFER_QUERY_MODE.set(p, "simple");
    return DriverManager.getConnection(url, p);
  }

  /** The pgoutput messages (protocol version 1) of {@code slot} for {@code publication}, from the slot's start. */
  public static PGReplicationStream pgoutput(Connection replication, String slot, String publication)
      throws SQLException {
    return replication.unwrap(PGConnection.class).getReplicationAPI().replicationStream().logical()
        .withSlotName(slot).withStartPosition(LogSequenceNumber.valueOf(0))
        .withSlotOption("proto_version", "1").withSlotOption("publication_names", publication).start();
  }
}
