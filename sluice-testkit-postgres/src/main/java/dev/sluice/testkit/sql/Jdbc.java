package dev.sluice.testkit.sql;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Arrays;
import java.util.List;

/** Plain statements on a connection of its own, for setting up databases in tests and benchmarks. */
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
}
