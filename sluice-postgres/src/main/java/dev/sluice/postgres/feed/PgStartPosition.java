package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import dev.sluice.feed.HistoryLostException;
import dev.sluice.feed.Position;
import dev.sluice.feed.StartPoint;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import org.postgresql.replication.LogSequenceNumber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where one partition's read starts, and the slot made ready for it: a checkpoint is checked
 * against the slot (a slot that is gone, invalidated or confirmed past it is lost history, ADR
 * 0063), and a snapshot the checkpoint names is resumed in a new one (ADR 0064); a snapshot start
 * creates the slot with its snapshot; the oldest and latest starts create the slot (again) when
 * there is none, or it was invalidated.
 */
final class PgStartPosition {
  private static final Logger log = LoggerFactory.getLogger(PgFeedCursor.class); // the cursor's log, as before the split

  /** Where the read starts, and the snapshot to read first (null: the stream starts at once). */
  record Start(PgPosition from, PgSnapshot snapshot) {}

  private final PostgresChangeFeedImpl feed;
  private final String slot;
  private final PgSlot slots;

  PgStartPosition(PostgresChangeFeedImpl feed, String slot, PgSlot slots) {
    this.feed = feed;
    this.slot = slot;
    this.slots = slots;
  }

  /** Where to stream from; creates the slot when the partition has none. */
  Start resolve(StartPoint start) throws SQLException {
    new PgPublicationCheck(feed).run();
    PgSlot.State state = slots.state();
    if (start instanceof StartPoint.After after) {
      PgPosition at;
      try {
        at = PgPosition.parse(after.position());
      } catch (IllegalArgumentException e) {
        throw new FeedException("PostgreSQL feed '" + feed.stream() + "': the checkpoint " + e.getMessage()
            + "; it was not written by this feed", e, false);
      }
      if (state == null) {
        // Not created again here: a new slot would start now and, read from this checkpoint, skip
        // everything in between without a word. The history-lost policy chooses the new start
        // (re-snapshot or latest, each with the gap recorded), and creates the slot for it.
        throw new HistoryLostException(after.position(), null, "replication slot " + slot + " does not exist,"
            + " so the server kept no WAL since the checkpoint: history lost. It was dropped (by an operator, by"
            + " 'sluice slots --drop' while no lease used it, or by a tool), or the checkpoint is from another"
            + " database. The slot is created again only when the history-lost policy starts the partition"
            + " afresh (RESNAPSHOT or SKIP_TO_LATEST)", null);
      }
      if (state.lost()) {
        throw lost(after.position(), state);
      }
      if (state.confirmed() > at.lsn()) {
        throw new HistoryLostException(after.position(), null, "replication slot " + slot + " has already"
            + " confirmed " + PgPosition.lsnText(state.confirmed()) + ", past the checkpoint:"
            + " something else read and confirmed through this slot", null);
      }
      if (at.snapshot() != null) {
        // The snapshot the checkpoint was read in died with its session: the rest of the rows are
        // read in a new one, and the changes it already holds are left out of the stream.
        PgSnapshot snapshot = PgSnapshot.export(feed, temporarySlotName(), true);
        try {
          snapshot.table(at.snapshot().table());
        } catch (RuntimeException e) {
          snapshot.close();
          throw e;
        }
        List<PgPosition.Cover> more = new ArrayList<>(at.covers());
        more.add(new PgPosition.Cover(at.snapshot().table(), at.snapshot().after(), snapshot.consistentPoint()));
        log.info("PostgreSQL feed '{}': slot {} resumes its snapshot after {} {} in a new snapshot consistent at {}",
            feed.stream(), slot, at.snapshot().table(), at.snapshot().after() == null ? "(start)" : at.snapshot().after(),
            PgSnapshot.lsn(snapshot.consistentPoint()));
        return new Start(new PgPosition(at.lsn(), 0, 0, at.snapshot(), more, at.uncovered()), snapshot);
      }
      return new Start(at, null);
    }
    if (start instanceof StartPoint.Snapshot) {
      if (state != null) {
        // Nothing to resume from this slot: a bootstrap that crashed before its first commit, a
        // group started afresh, or lost history repaired by a snapshot (HistoryLostPolicy
        // RESNAPSHOT). The snapshot needs a slot created with it.
        log.warn("PostgreSQL feed '{}': replication slot {} exists but a snapshot starts the partition (no"
            + " checkpoint, or lost history repaired); dropping it to create it again with a snapshot", feed.stream(), slot);
        slots.drop();
      }
      PgSnapshot snapshot = PgSnapshot.export(feed, slot, false);
      long slotStart = snapshot.consistentPoint();
      PgPosition.SnapshotAt snapshotAt;
      try {
        snapshotAt = new PgPosition.SnapshotAt(snapshot.tables().get(0).qualifiedName(), null);
      } catch (RuntimeException e) {
        snapshot.close();
        throw e;
      }
      log.info("PostgreSQL feed '{}': created replication slot {} at {} with a snapshot of {}", feed.stream(), slot,
          PgSnapshot.lsn(slotStart), snapshot.tables().stream().map(PgSnapshot.Table::qualifiedName).toList());
      return new Start(new PgPosition(slotStart, 0, 0, snapshotAt, List.of()), snapshot);
    }
    if (start instanceof StartPoint.AtTime) {
      throw new FeedException("PostgreSQL feed '" + feed.stream() + "': starting at a time is not supported"
          + " (WAL positions are not indexed by time); start at oldest (what the slot still holds) or latest", null, false);
    }
    if (state != null && state.lost()) {
      // Starting afresh (the policy skips to latest, or a new group starts at oldest): the
      // invalidated slot can never be read again; a new one starts now.
      log.warn("PostgreSQL feed '{}': replication slot {} was invalidated (wal_status lost); dropping it and"
          + " creating it again to start at {}", feed.stream(), slot, start);
      slots.drop();
      state = null;
    }
    long created = state == null ? slots.create() : -1;
    if (start instanceof StartPoint.Oldest) {
      return new Start(PgPosition.boundary(state == null ? created : state.confirmed()), null);
    }
    // Latest: the server's current WAL position (what was committed before is not delivered).
    try (Connection c = feed.connections.connect(false); Statement s = c.createStatement();
        ResultSet rs = s.executeQuery("SELECT pg_current_wal_lsn()")) {
      rs.next();
      long current = LogSequenceNumber.valueOf(rs.getString(1)).asLong();
      return new Start(PgPosition.boundary(Math.max(current, state == null ? created : state.confirmed())), null);
    }
  }

  private HistoryLostException lost(Position from, PgSlot.State state) {
    return new HistoryLostException(from == null ? new Position("0/0", null) : from, null,
        "replication slot " + slot + " was invalidated (wal_status " + state.walStatus() + "): it fell behind"
            + " max_slot_wal_keep_size and the server removed WAL it still needed; drop it"
            + " (SELECT pg_drop_replication_slot('" + slot + "')) for the feed to create it again", null);
  }

  /** Gives the slot name of a temporary slot exporting a snapshot (dropped with its session). */
  private static String temporarySlotName() {
    return "sluice_snapshot_" + Long.toHexString(ThreadLocalRandom.current().nextLong() >>> 1);
  }
}
