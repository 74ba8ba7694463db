package dev.sluice.postgres.feed;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.feed.ChangeFeedContract.Source;
import dev.sluice.testkit.feed.ChangeFeedContract.Write;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Map;

/**
 * A database per use with one table {@code public.t (k text PRIMARY KEY, version bigint)} in
 * publication {@code pub}, for the feed and listener contracts: a unit of writes is one transaction;
 * history is cut by dropping the slot; the lease store is the SQL one on the same database.
 */
final class PostgresTestSource implements Source<Map<String, Object>> {
  private final EmbeddedPostgresServer pg;
  private final String db;
  private final PostgresChangeFeed feed;

  PostgresTestSource(EmbeddedPostgresServer server, String db) {
    this.pg = server;
    this.db = db;
    try (Connection c = pg.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("CREATE TABLE public.t (k text PRIMARY KEY, version bigint NOT NULL)");
      s.execute("CREATE PUBLICATION pub FOR TABLE public.t");
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    this.feed = PostgresChangeFeed.builder(pg.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
        .table("public.t").batchSize(50).build();
  }

  @Override
  public ChangeFeed<Map<String, Object>> feed() {
    return feed;
  }

  @Override
  public void write(List<Write> writes) {
    try (Connection c = pg.dataSource(db).getConnection();
        PreparedStatement upsert = c.prepareStatement(
            "INSERT INTO t VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET version = excluded.version");
        PreparedStatement delete = c.prepareStatement("DELETE FROM t WHERE k = ?")) {
      c.setAutoCommit(false);
      for (Write w : writes) {
        if (w.version() == null) {
          delete.setString(1, w.key());
          delete.executeUpdate();
        } else {
          upsert.setString(1, w.key());
          upsert.setLong(2, w.version());
          upsert.executeUpdate();
        }
      }
      c.commit();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public Long version(ChangeEvent<Map<String, Object>> change) {
    Map<String, Object> d = change.document();
    return d == null ? null : ((Number) d.get("version")).longValue();
  }

  /** The key column's text, from a key that must be qualified by the table (ADR 0093). */
  @Override
  public String writtenKey(ChangeEvent<Map<String, Object>> change) {
    String written = (String) change.documentKey().get("k");
    String expected = PgRowDecoder.key("public.t", List.of(written));
    if (!change.key().equals(expected)) {
      throw new AssertionError("key " + change.key() + " of row " + written + ", expected " + expected);
    }
    return written;
  }

  @Override
  public void forgetThrough(ChangeEvent<Map<String, Object>> change) {
    try (Connection c = pg.dataSource(db).getConnection(); Statement s = c.createStatement()) {
      s.execute("SELECT pg_drop_replication_slot('" + feed.slotName(PartitionSpec.single()) + "')");
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public LeaseStore leaseStore() {
    return SqlLeaseStore.builder(pg.dataSource(db)).build();
  }

  @Override
  public void close() {
    pg.dropReplicationSlots(db);
  }
}
