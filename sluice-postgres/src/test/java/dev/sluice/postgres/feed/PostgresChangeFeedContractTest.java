package dev.sluice.postgres.feed;

import dev.sluice.testkit.feed.ChangeFeedContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
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
    return new PostgresTestSource(PG, PG.createDatabase("contract" + DATABASES.incrementAndGet()));
  }
}
