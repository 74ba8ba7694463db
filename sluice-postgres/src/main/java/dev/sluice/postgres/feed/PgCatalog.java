package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashMap;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The catalog queries of one partition's read of the stream: a relation's table (columns, primary
 * key) and the base type of a column's type, each read once over a plain connection opened when
 * first needed, and the names of the types the stream described. A failed query is a retryable
 * FeedException naming the table.
 */
final class PgCatalog implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(PgFeedCursor.class); // the cursor's log, as before the split
  /** OIDs below this are the built-in types'. */
  private static final int FIRST_NORMAL_OBJECT_ID = 16384;

  private final PostgresChangeFeedImpl feed;
  private final String slot;
  /** A plain connection for the catalog and key comparisons, opened when first needed. */
  private Connection sql;
  /** Tables by qualified name, read from the catalog when first needed. */
  private final Map<String, PgSnapshot.Table> tables = new HashMap<>();
  /** The base type of each non-built-in column type seen (a domain's; others themselves), by OID. */
  private final Map<Integer, Integer> baseTypes = new HashMap<>();
  /** Names of the non-built-in types the stream described (TYPE messages), by OID. */
  private final Map<Integer, String> typeNames = new HashMap<>();

  PgCatalog(PostgresChangeFeedImpl feed, String slot) {
    this.feed = feed;
    this.slot = slot;
  }

  /** The catalog's description of a relation's table (primary key, types), cached until its next RELATION. */
  PgSnapshot.Table table(PgOutput.Relation r) {
    PgSnapshot.Table t = tables.get(r.qualifiedName());
    if (t == null) {
      try {
        t = PgSnapshot.describe(connection(), r.namespace(), r.name());
      } catch (SQLException e) {
        throw new FeedException("PostgreSQL feed '" + feed.stream() + "': cannot read the primary key of "
            + r.qualifiedName() + " from the catalog: " + e.getMessage(), e, true);
      }
      tables.put(r.qualifiedName(), t);
    }
    return t;
  }

  /** A RELATION message came: the table may have changed, and is read again when next needed. */
  void forget(PgOutput.Relation r) {
    tables.remove(r.qualifiedName());
  }

  /** Records the name of a type the stream described (a TYPE message), for errors naming a column's type. */
  void described(PgOutput.Type t) {
    typeNames.put(t.oid(), t.namespace() + "." + t.name());
  }

  /** The name the stream gave type {@code oid}, or null. */
  String typeName(int oid) {
    return typeNames.get(oid);
  }

  /**
   * The type whose values a column of type {@code oid} holds: for a domain its base type, read
   * from the catalog once per type (built-in types, below FirstNormalObjectId, are no domains).
   */
  int baseType(PgOutput.Relation r, int oid) {
    if (oid < FIRST_NORMAL_OBJECT_ID) {
      return oid;
    }
    Integer base = baseTypes.get(oid);
    if (base == null) {
      try (PreparedStatement s = connection().prepareStatement("SELECT " + PgSnapshot.baseTypeOf("?::oid"))) {
        s.setInt(1, oid);
        try (ResultSet rs = s.executeQuery()) {
          base = rs.next() && rs.getObject(1) != null ? (int) rs.getLong(1) : oid;
        }
      } catch (SQLException e) {
        throw new FeedException("PostgreSQL feed '" + feed.stream() + "': cannot read the type of a column of "
            + r.qualifiedName() + " (oid " + oid + ") from the catalog: " + e.getMessage(), e, true);
      }
      baseTypes.put(oid, base);
    }
    return base;
  }

  /** The plain connection, opened (again) when needed: for the catalog and for key comparisons. */
  Connection connection() throws SQLException {
    if (sql == null || sql.isClosed()) {
      sql = feed.connections.connectForSnapshot();
    }
    return sql;
  }

  @Override
  public void close() {
    if (sql != null) {
      try {
        sql.close();
      } catch (SQLException e) {
        log.debug("closing the catalog connection of {}: {}", slot, e.toString());
      }
      sql = null;
    }
  }
}
