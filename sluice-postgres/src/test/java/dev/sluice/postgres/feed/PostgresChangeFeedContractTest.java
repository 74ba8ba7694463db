package dev.sluice.postgres.feed;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.ChangeFeed;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.jdbc.lease.SqlLeaseStore;
import dev.sluice.lease.LeaseStore;
import dev.sluice.testkit.feed.ChangeFeedContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The feed conformance suite on the PostgreSQL feed, on a real PostgreSQL 17: a database per test
 * with one table in a publication; a unit of writes is one transaction; history is cut by dropping
 * the slot (the server then keeps no WAL for the checkpoint).
 */
class PostgresChangeFeedContractTest extends ChangeFeedContract<Map<String, Object>> {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();

  @Override
  protected Source<Map<String, Object>> newSource() {
    return new PgSource(PG.createDatabase("contract" + DATABASES.incrementAndGet()));
  }

  private static final class PgSource implements Source<Map<String, Object>> {
    private final String db;
    private final PostgresChangeFeed feed;

    PgSource(String db) {
      this.db = db;
      try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
        s.execute("CREATE TABLE public.t (k text PRIMARY KEY, version bigint NOT NULL)");
        s.execute("CREATE PUBLICATION pub FOR TABLE public.t");
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
      this.feed = PostgresChangeFeed.builder(PG.jdbcUrl(db), EmbeddedPostgresServer.USER, null, "pub")
          .table("public.t").batchSize(50).build();
    }

    @Override
    public ChangeFeed<Map<String, Object>> feed() {
      return feed;
    }

    @Override
    public void write(List<Write> writes) {
      try (Connection c = PG.dataSource(db).getConnection();
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

    @Override
    public void forgetThrough(ChangeEvent<Map<String, Object>> change) {
      try (Connection c = PG.dataSource(db).getConnection(); Statement s = c.createStatement()) {
        s.execute("SELECT pg_drop_replication_slot('" + feed.slotName(PartitionSpec.single()) + "')");
      } catch (SQLException e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    public LeaseStore leaseStore() {
      return SqlLeaseStore.builder(PG.dataSource(db)).build();
    }

    @Override
    public void close() {
      PG.dropReplicationSlots(db);
    }
  }
}
