package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

/**
 * The key ranges a later snapshot read after a restart in the middle of the bootstrap ({@link
 * PgPosition.Cover}, ADR 0064): a change of a row in such a range that committed before that
 * snapshot is in it already, so the stream leaves it out, until every transaction it reads
 * committed after every covering snapshot. A table emptied, or a row whose key an update moved out
 * of a range read earlier, is uncovered while covers apply: none of its later changes is left out.
 * Every position of the cursor carries both ({@link #at}), so a restart leaves out the same changes.
 */
final class PgCovers {
  private final PostgresChangeFeedImpl feed;
  private final PgCatalog catalog;
  /** Key ranges read in a later snapshot after a restart: their earlier changes are left out. */
  private List<PgPosition.Cover> covers = List.of();
  /** Tables and rows uncovered while covers apply: none of their later changes is left out. */
  private final Set<String> uncovered = new TreeSet<>();

  PgCovers(PostgresChangeFeedImpl feed, PgCatalog catalog) {
    this.feed = feed;
    this.catalog = catalog;
  }

  /** Takes the covers of the position the cursor starts at. */
  void resume(PgPosition from) {
    covers = from.covers();
    uncovered.addAll(from.uncovered());
  }

  /** A position of the cursor, with the covers as they are now. */
  PgPosition at(long lsn, long xid, long rows, PgPosition.SnapshotAt snapshot, int part, long messages) {
    return new PgPosition(lsn, xid, rows, snapshot, covers, uncovered, part, messages);
  }

  /** A transaction committed at {@code boundary}: covers end once it is past every covering snapshot. */
  void committed(long boundary) {
    if (!covers.isEmpty() && covers.stream().allMatch(cover -> boundary >= cover.lsn())) {
      covers = List.of(); // every later transaction committed after every covering snapshot
      uncovered.clear();
    }
  }

  /**
   * The consumer empties the table: rows a later snapshot held, written again after this, must
   * then come through the stream too.
   */
  void truncated(String table) {
    if (!covers.isEmpty()) {
      uncovered.add(table);
    }
  }

  /** Whether covers apply to a change of row {@code rowId} (neither it nor its table is uncovered). */
  boolean applyTo(PgOutput.Relation r, String rowId) {
    return !covers.isEmpty() && !uncovered.contains(r.qualifiedName()) && !uncovered.contains(rowId);
  }

  /** Uncovers a row: an update moved its key out of a range read earlier, so its later changes must come. */
  void uncover(String rowId) {
    uncovered.add(rowId);
  }

  /**
   * Whether this change's row lies in a range a later snapshot read (after a restart in the middle
   * of the bootstrap), and the change committed ({@code finalLsn}) before that snapshot, so it is
   * in it already.
   */
  boolean coveredBefore(PgOutput.Relation r, List<PgOutput.Value> values, long finalLsn) {
    PgSnapshot.Table table = catalog.table(r);
    if (table == null || table.primaryKey().isEmpty()) {
      return false;
    }
    List<String> pk = new ArrayList<>();
    for (PgSnapshot.Column k : table.primaryKey()) {
      int i = indexOf(r, k.name());
      if (i < 0 || values.get(i).kind() == 'u' || values.get(i).kind() == 'n') {
        return false; // no key to place it by: delivered
      }
      pk.add(values.get(i).text());
    }
    PgPosition.Cover applicable = null;
    try {
      for (PgPosition.Cover c : covers) {
        int order = compareTables(r.namespace(), r.name(), c.table());
        boolean covered = order > 0 || order == 0
            && (c.after() == null || PgSnapshot.greater(catalog.connection(), table, pk, c.after()));
        if (covered) {
          applicable = c;
        }
      }
    } catch (SQLException e) {
      throw new FeedException("PostgreSQL feed '" + feed.stream() + "': cannot place a change of " + r.qualifiedName()
          + " against the snapshot read after a restart: " + e.getMessage(), e, true);
    }
    return applicable != null && finalLsn < applicable.lsn();
  }

  /** Orders tables as the snapshot reads them: by schema, then name (C collation). */
  private static int compareTables(String schema, String name, String qualified) {
    int dot = qualified.indexOf('.');
    int bySchema = schema.compareTo(qualified.substring(0, dot));
    return bySchema != 0 ? bySchema : name.compareTo(qualified.substring(dot + 1));
  }

  private static int indexOf(PgOutput.Relation r, String column) {
    for (int i = 0; i < r.columns().size(); i++) {
      if (r.columns().get(i).name().equals(column)) {
        return i;
      }
    }
    return -1;
  }
}
