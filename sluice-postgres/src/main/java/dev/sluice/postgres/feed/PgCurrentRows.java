package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import java.sql.SQLException;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;

/**
 * Every row of a feed's tables as it is now ({@link PostgresChangeFeed#currentRows}), table by
 * table in primary key order, read {@code chunk} rows per statement while iterating (no snapshot,
 * no slot). The connection closes at the end; a read error is a FeedException.
 */
final class PgCurrentRows implements Iterator<PostgresChangeFeed.CurrentRow> {
  private final PostgresChangeFeedImpl feed;
  private final int chunk;
  private PgSnapshot reader;
  private int table;
  private List<String> after;
  private final ArrayDeque<PostgresChangeFeed.CurrentRow> buffer = new ArrayDeque<>();
  private boolean done;

  PgCurrentRows(PostgresChangeFeedImpl feed, int chunk) {
    this.feed = feed;
    this.chunk = chunk;
  }

  @Override
  public boolean hasNext() {
    try {
      if (reader == null && !done) {
        reader = PgSnapshot.current(feed);
      }
      while (buffer.isEmpty() && !done) {
        PgSnapshot.Table t = reader.tables().get(table);
        List<PgSnapshot.Row> rows = reader.read(t, after, chunk);
        for (PgSnapshot.Row r : rows) {
          buffer.add(new PostgresChangeFeed.CurrentRow(t.qualifiedName(), r.eventKey(), r.documentKey(), r.document()));
          after = r.key();
        }
        if (rows.size() < chunk) {
          after = null;
          if (++table == reader.tables().size()) {
            done = true;
            reader.close();
          }
        }
      }
      return !buffer.isEmpty();
    } catch (SQLException e) {
      done = true;
      if (reader != null) {
        reader.close();
      }
      throw new FeedException("PostgreSQL feed '" + feed.stream() + "': cannot read the current rows: " + e.getMessage(),
          e, true);
    }
  }

  @Override
  public PostgresChangeFeed.CurrentRow next() {
    if (!hasNext()) {
      throw new NoSuchElementException();
    }
    return buffer.poll();
  }
}
