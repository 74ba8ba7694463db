package dev.sluice.postgres.feed;

import dev.sluice.testkit.feed.ChangeFeedContract.Source;
import dev.sluice.testkit.feed.ListenerContract;
import dev.sluice.testkit.sql.EmbeddedPostgresServer;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The listener's deployment scenarios on the PostgreSQL feed, guarded by the SQL lease store on
 * the same database, on a real PostgreSQL 17.
 */
class PostgresListenerContractTest extends ListenerContract<Map<String, Object>> {
  private static final EmbeddedPostgresServer PG = EmbeddedPostgresServer.shared();
  private static final AtomicInteger DATABASES = new AtomicInteger();

  @Override
  protected Source<Map<String, Object>> newSource() {
    return new PostgresTestSource(PG, PG.createDatabase("listeners" + DATABASES.incrementAndGet()));
  }
}
