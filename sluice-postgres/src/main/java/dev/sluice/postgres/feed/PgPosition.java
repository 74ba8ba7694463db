package dev.sluice.postgres.feed;

import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.postgresql.replication.LogSequenceNumber;

/**
 * A PostgreSQL feed position. Resuming always starts at a transaction boundary, {@code lsn}: the
 * end of the last transaction read whole, where the slot can start again. A position inside a
 * transaction (after its {@code rows}-th change of this feed's tables) keeps that boundary and
 * names the transaction ({@code xid}): resuming re-reads the transaction from its start and skips
 * the changes already processed, so a checkpoint taken inside a transaction neither loses nor
 * repeats any of its changes. Token: {@code 0/16B3748} or {@code 0/16B3748 xid=745 rows=3}.
 *
 * @param lsn the transaction boundary to stream from
 * @param xid the transaction partly processed, or 0 when the position is at the boundary
 * @param rows how many of that transaction's changes were processed
 */
record PgPosition(long lsn, long xid, long rows) {
  private static final Pattern TOKEN =
      Pattern.compile("([0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8})(?: xid=(\\d+) rows=(\\d+))?");

  static PgPosition boundary(long lsn) {
    return new PgPosition(lsn, 0, 0);
  }

  boolean inside() {
    return xid != 0;
  }

  Position toPosition(Instant time) {
    String at = LogSequenceNumber.valueOf(lsn).asString();
    return new Position(inside() ? at + " xid=" + xid + " rows=" + rows : at, time);
  }

  /** The position a token names, or an IllegalArgumentException saying what a token looks like. */
  static PgPosition parse(Position position) {
    Matcher m = TOKEN.matcher(position.token().trim());
    if (!m.matches()) {
      throw new IllegalArgumentException("'" + position.token() + "' is not a PostgreSQL feed position"
          + " (an LSN such as 0/16B3748, optionally followed by ' xid=<n> rows=<n>')");
    }
    long lsn = LogSequenceNumber.valueOf(m.group(1)).asLong();
    return m.group(2) == null ? boundary(lsn)
        : new PgPosition(lsn, Long.parseLong(m.group(2)), Long.parseLong(m.group(3)));
  }
}
