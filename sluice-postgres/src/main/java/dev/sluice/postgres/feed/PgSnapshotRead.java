package dev.sluice.postgres.feed;

import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.feed.PartitionSpec;
import dev.sluice.feed.Position;
import dev.sluice.feed.UndecodableChange;
import java.sql.SQLException;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The read of a partition's bootstrap snapshot ({@link PgSnapshot}, ADR 0064), a chunk per poll:
 * each row the partition owns is a SNAPSHOT change whose position names the slot's start and the
 * last key read; a row that cannot be converted is an undecodable change of its key. Once the last
 * table is read the snapshot is closed and the stream starts at {@link #slotStart}.
 */
final class PgSnapshotRead implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PgFeedCursor.class); // the cursor's log, as before the split

  private final PostgresChangeFeedImpl feed;
  private final PartitionSpec partition;
  private final String slot;
  private final PgCovers covers;
  private final PgSnapshot snapshot;
  /** Where the slot started (the snapshot's consistent point): the stream's start after the snapshot. */
  private final long slotStart;
  /** Where the read stands; null once the snapshot is read. */
  private PgPosition.SnapshotAt at;
  /** The position of the last row or table read; null before the first. */
  private Position position;
  private boolean closed;

  /** A read of {@code snapshot} from {@code from}. */
  PgSnapshotRead(PostgresChangeFeedImpl feed, PartitionSpec partition, String slot, PgCovers covers, PgSnapshot snapshot,
      PgPosition from) {
    this.feed = feed;
    this.partition = partition;
    this.slot = slot;
    this.covers = covers;
    this.snapshot = snapshot;
    this.slotStart = from.lsn();
    this.at = from.snapshot();
  }

  /** Where the stream starts once the snapshot is read. */
  long slotStart() {
    return slotStart;
  }

  /**
   * The position of the last row read (or of the table started, or of the stream's start once
   * read); null before the first: the cursor's start position stands.
   */
  Position position() {
    return position;
  }

  /** Whether the whole snapshot was read. */
  boolean done() {
    return at == null;
  }

  /** Adds the next chunk's changes to {@code out}; at the end of the last table the snapshot is closed. */
  void read(List<ChangeEvent<Map<String, Object>>> out) throws SQLException {
    PgSnapshot.Table table = snapshot.table(at.table());
    List<PgSnapshot.Row> chunk = snapshot.read(table, at.after(), feed.batchSize);
    String lsn = PgSnapshot.lsn(slotStart);
    for (PgSnapshot.Row row : chunk) {
      at = new PgPosition.SnapshotAt(table.qualifiedName(), row.key());
      position = positionAt(at);
      String key = row.eventKey();
      if (partition.owns(key)) {
        String id = "snapshot@" + lsn + ":" + table.qualifiedName() + ":" + key;
        ChangeEvent<Map<String, Object>> change;
        try {
          change = new ChangeEvent<>(id, feed.stream(), position, Operation.SNAPSHOT, key, row.documentKey(),
              row.document(), null, Map.of("table", table.qualifiedName(), "snapshot", lsn));
        } catch (Unconvertible e) {
          String reason = "PostgreSQL feed '" + feed.stream() + "': snapshot row " + id + " at " + position + " "
              + e.describe(table.qualifiedName());
          log.warn("{}; handed on as an undecodable change of key {}", reason, key);
          change = new ChangeEvent<>(id, feed.stream(), position, Operation.SNAPSHOT, key, null, null, null,
              new UndecodableChange(reason, Map.of("table", table.qualifiedName(), "snapshot", lsn,
                  "columns", row.columnTexts())));
        }
        out.add(change);
      }
    }
    if (chunk.size() < feed.batchSize) {
      PgSnapshot.Table next = snapshot.next(table.qualifiedName());
      if (next != null) {
        at = new PgPosition.SnapshotAt(next.qualifiedName(), null);
        position = positionAt(at);
      } else {
        log.info("PostgreSQL feed '{}': snapshot of slot {} read; streaming from {}", feed.stream(), slot, lsn);
        close();
        at = null;
        position = positionAt(null);
      }
    }
  }

  private Position positionAt(PgPosition.SnapshotAt at) {
    return covers.at(slotStart, 0, 0, at, 0, 0).toPosition(null);
  }

  @Override
  public void close() {
    if (!closed) {
      closed = true;
      snapshot.close();
    }
  }
}
