package dev.sluice.postgres.feed;

import dev.sluice.feed.FeedException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.postgresql.PGConnection;

import org.postgresql.replication.ReplicationSlotInfo;

/**
 * The snapshot bootstrap of a PostgreSQL feed (issue 13 item 3; {@code docs/adr/0064}).
 *
 * <p>The partition's slot is created with an exported snapshot: the snapshot sees exactly the
 * transactions that committed before the slot's consistent point, and the slot streams exactly
 * those that commit after it. The existing rows are read in that snapshot, table by table (the
 * publication's, in name order), in primary key order, a chunk per poll; each row is a SNAPSHOT
 * change whose position names the slot's start and the last key read. Then the stream starts at
 * the slot's start: nothing missed, nothing twice.
 *
 * <p>An exported snapshot dies with its session. After a crash in the middle of a snapshot, the
 * rest of the rows (keys after the checkpoint's) are read in a new snapshot, exported by a
 * temporary slot, consistent at a later point; the position records that range as a {@link
 * PgPosition.Cover}. Changes of rows in a covered range that committed before the covering
 * snapshot are in it already, so the stream leaves them out: each row is delivered as of one
 * snapshot and then with every later change, in order.
 *
 * <p>Tables need a primary key (the reading order, and how a change is placed in a covered range)
 * and replica identity DEFAULT or FULL (so that every change, deletes included, carries it).
 */
final class PgSnapshot implements AutoCloseable {

  /** A column of a published table, in attribute order. */
  record Column(String name, int typeOid, String type, boolean primaryKey) {}

  /** A published table: its columns and its primary key columns in the key's own order. */
  record Table(String schema, String name, List<Column> columns, List<Column> primaryKey, String replicaIdentity) {
    String qualifiedName() {
      return schema + "." + name;
    }

    String sqlName() {
      return quote(schema) + "." + quote(name);
    }

    /** The positions of the primary key columns in {@code columns}, in the key's order. */
    int[] keyIndexes() {
      int[] out = new int[primaryKey.size()];
      for (int i = 0; i < out.length; i++) {
        out[i] = columns.indexOf(primaryKey.get(i));
      }
      return out;
    }
  }

  /** One row read: its column texts in attribute order, and its primary key's texts. */
  record Row(Table table, List<String> texts, List<String> key) {
    Map<String, Object> document() {
      Map<String, Object> out = new LinkedHashMap<>();
      for (int i = 0; i < table.columns().size(); i++) {
        Column c = table.columns().get(i);
        out.put(c.name(), convert(c, texts.get(i)));
      }
      return Collections.unmodifiableMap(out);
    }

    /** The value of {@code text} in column {@code c}, or an {@link Unconvertible} naming it. */
    private static Object convert(Column c, String text) {
      try {
        return PgValues.convert(c.typeOid(), text);
      } catch (RuntimeException e) {
        throw new Unconvertible(c.name(), c.type(), text, e);
      }
    }

    /** Every column's text, by name, for an undecodable change. */
    Map<String, Object> columnTexts() {
      Map<String, Object> out = new LinkedHashMap<>();
      for (int i = 0; i < table.columns().size(); i++) {
        out.put(table.columns().get(i).name(), texts.get(i));
      }
      return Collections.unmodifiableMap(out);
    }

    /** The change key, as the stream gives it ({@link PgRowDecoder#key}): primary key texts in column order. */
    String eventKey() {
      List<String> texts = new ArrayList<>();
      for (int i = 0; i < table.columns().size(); i++) {
        if (table.columns().get(i).primaryKey()) {
          texts.add(this.texts.get(i));
        }
      }
      return PgRowDecoder.key(table.qualifiedName(), texts);
    }

    Map<String, Object> documentKey() {
      Map<String, Object> out = new LinkedHashMap<>();
      for (Column c : table.columns()) {
        if (c.primaryKey()) {
          out.put(c.name(), convert(c, texts.get(table.columns().indexOf(c))));
        }
      }
      return Collections.unmodifiableMap(out);
    }
  }

  private final PostgresChangeFeedImpl feed;
  private final List<Table> tables;
  private final Connection reader;
  /** The consistent point of the snapshot being read. */
  private final long consistentPoint;

  private PgSnapshot(PostgresChangeFeedImpl feed, List<Table> tables, Connection reader, long consistentPoint) {
    this.feed = feed;
    this.tables = tables;
    this.reader = reader;
    this.consistentPoint = consistentPoint;
  }

  /**
   * Creates slot {@code slot} (temporary: dropped when the session ends) with an exported snapshot
   * and opens a read-only transaction in it.
   */
  static PgSnapshot export(PostgresChangeFeedImpl feed, String slot, boolean temporary) throws SQLException {
    Connection reader = feed.connections.connectForSnapshot();
    try {
      List<Table> tables = tables(feed, reader);
      if (feed.failover && !temporary) {
        PgSlot.requireFailover(reader, feed);
      }
      try (Connection replication = feed.connections.connect(true)) {
        var builder = replication.unwrap(PGConnection.class).getReplicationAPI().createReplicationSlot()
            .logical().withSlotName(slot).withOutputPlugin("pgoutput");
        if (temporary) {
          builder = builder.withTemporaryOption();
        }
        ReplicationSlotInfo info = builder.make();
        // The snapshot lives until the replication session runs another command: import it first.
        reader.setAutoCommit(false);
        reader.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
        reader.setReadOnly(true);
        try (Statement s = reader.createStatement()) {
          s.execute("SET TRANSACTION SNAPSHOT '" + info.getSnapshotName().replace("'", "''") + "'");
        }
        if (feed.failover && !temporary) {
          // pgjdbc's slot builder has no FAILOVER option; the replication command sets it, once
          // the snapshot is imported (another command on this session ends the export).
          try (Statement s = replication.createStatement()) {
            s.execute("ALTER_REPLICATION_SLOT " + slot + " (FAILOVER true)");
          }
        }
        return new PgSnapshot(feed, tables, reader, info.getConsistentPoint().asLong());
      }
    } catch (SQLException | RuntimeException e) {
      reader.close();
      throw e;
    }
  }

  /**
   * Reads the tables as they are now, without a snapshot: each chunk its own statement (for a
   * current-state replay, which needs no point in time).
   */
  static PgSnapshot current(PostgresChangeFeedImpl feed) throws SQLException {
    Connection reader = feed.connections.connectForSnapshot();
    try {
      return new PgSnapshot(feed, tables(feed, reader), reader, -1);
    } catch (SQLException | RuntimeException e) {
      reader.close();
      throw e;
    }
  }

  long consistentPoint() {
    return consistentPoint;
  }

  List<Table> tables() {
    return tables;
  }

  /** The table after {@code table} in reading order, or null after the last. */
  Table next(String table) {
    for (int i = 0; i < tables.size(); i++) {
      if (tables.get(i).qualifiedName().equals(table)) {
        return i + 1 < tables.size() ? tables.get(i + 1) : null;
      }
    }
    throw new FeedException("PostgreSQL feed '" + feed.stream() + "': table " + table + " of the checkpoint's"
        + " snapshot is no longer published by " + feed.publication + " (or has no primary key)", null, false);
  }

  Table table(String name) {
    for (Table t : tables) {
      if (t.qualifiedName().equals(name)) {
        return t;
      }
    }
    throw new FeedException("PostgreSQL feed '" + feed.stream() + "': table " + name + " of the checkpoint's"
        + " snapshot is no longer published by " + feed.publication, null, false);
  }

  /** Up to {@code limit} rows of {@code table} with a primary key after {@code after} (null: from the first). */
  List<Row> read(Table table, List<String> after, int limit) throws SQLException {
    StringBuilder sql = new StringBuilder("SELECT ");
    for (int i = 0; i < table.columns().size(); i++) {
      sql.append(i == 0 ? "" : ", ").append(quote(table.columns().get(i).name()));
    }
    sql.append(" FROM ").append(table.sqlName());
    String keyList = keyList(table);
    if (after != null) {
      sql.append(" WHERE (").append(keyList).append(") > (").append(casts(table)).append(")");
    }
    sql.append(" ORDER BY ").append(keyList).append(" LIMIT ").append(limit);
    List<Row> out = new ArrayList<>();
    try (PreparedStatement s = reader.prepareStatement(sql.toString())) {
      if (after != null) {
        for (int i = 0; i < after.size(); i++) {
          s.setString(i + 1, after.get(i));
        }
      }
      int[] keys = table.keyIndexes();
      try (ResultSet rs = s.executeQuery()) {
        while (rs.next()) {
          List<String> texts = new ArrayList<>(table.columns().size());
          for (int i = 0; i < table.columns().size(); i++) {
            texts.add(rs.getString(i + 1));
          }
          List<String> key = new ArrayList<>(keys.length);
          for (int k : keys) {
            key.add(texts.get(k));
          }
          out.add(new Row(table, Collections.unmodifiableList(texts), List.copyOf(key)));
        }
      }
    }
    return out;
  }

  @Override
  public void close() {
    try {
      reader.close();
    } catch (SQLException e) {
      // the transaction only read; nothing to keep
    }
  }

  private static String keyList(Table table) {
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < table.primaryKey().size(); i++) {
      s.append(i == 0 ? "" : ", ").append(quote(table.primaryKey().get(i).name()));
    }
    return s.toString();
  }

  private static String casts(Table table) {
    StringBuilder s = new StringBuilder();
    for (int i = 0; i < table.primaryKey().size(); i++) {
      s.append(i == 0 ? "" : ", ").append("CAST(? AS ").append(table.primaryKey().get(i).type()).append(")");
    }
    return s.toString();
  }

  /**
   * Whether primary key {@code key} (the key columns' texts) of {@code table} is greater than
   * {@code after}, in the server's order (collations included); asked of the server through
   * {@code connection}.
   */
  static boolean greater(Connection connection, Table table, List<String> key, List<String> after)
      throws SQLException {
    String casts = casts(table);
    try (PreparedStatement s = connection.prepareStatement("SELECT (" + casts + ") > (" + casts + ")")) {
      int n = table.primaryKey().size();
      for (int i = 0; i < n; i++) {
        s.setString(i + 1, key.get(i));
        s.setString(n + i + 1, after.get(i));
      }
      try (ResultSet rs = s.executeQuery()) {
        rs.next();
        return rs.getBoolean(1);
      }
    }
  }

  /**
   * The tables the feed reads (the publication's, or the one table it is limited to), in name
   * order, with their columns and primary keys; refuses a table a snapshot cannot read exactly.
   */
  static List<Table> tables(PostgresChangeFeedImpl feed, Connection c) throws SQLException {
    List<String[]> names = new ArrayList<>();
    try (PreparedStatement s = c.prepareStatement(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = ?"
            + " ORDER BY schemaname COLLATE \"C\", tablename COLLATE \"C\"")) {
      s.setString(1, feed.publication);
      try (ResultSet rs = s.executeQuery()) {
        while (rs.next()) {
          if (feed.table == null || feed.table.equals(rs.getString(1) + "." + rs.getString(2))) {
            names.add(new String[] {rs.getString(1), rs.getString(2)});
          }
        }
      }
    }
    if (names.isEmpty()) {
      throw new FeedException("PostgreSQL feed '" + feed.stream() + "': publication " + feed.publication
          + (feed.table == null ? " publishes no table (or does not exist)" : " does not publish " + feed.table)
          + "; nothing to snapshot", null, false);
    }
    List<Table> out = new ArrayList<>();
    for (String[] name : names) {
      out.add(table(feed, c, name[0], name[1]));
    }
    return List.copyOf(out);
  }

  /** One table's columns and primary key (a table the snapshot cannot read exactly is refused). */
  static Table table(PostgresChangeFeedImpl feed, Connection c, String schema, String name) throws SQLException {
    Table table = describe(c, schema, name);
    String qualified = table.qualifiedName();
    if (table.primaryKey().isEmpty()) {
      throw new FeedException("PostgreSQL feed '" + feed.stream() + "': table " + qualified + " has no primary"
          + " key; a snapshot reads rows in key order and places each change by its key. Add a primary key,"
          + " or bootstrap at oldest or latest", null, false);
    }
    if (!"d".equals(table.replicaIdentity()) && !"f".equals(table.replicaIdentity())) {
      throw new FeedException("PostgreSQL feed '" + feed.stream() + "': table " + qualified + " has replica"
          + " identity " + ("i".equals(table.replicaIdentity()) ? "USING INDEX" : "NOTHING") + ", so its deletes do"
          + " not carry the primary key a snapshot places them by; use REPLICA IDENTITY DEFAULT or FULL", null, false);
    }
    return table;
  }

  /** One table's columns and primary key (empty without one), as the catalog has them now. */
  static Table describe(Connection c, String schema, String name) throws SQLException {
    List<Column> columns = new ArrayList<>();
    List<Object[]> keyOrder = new ArrayList<>();
    String identity = null;
    try (PreparedStatement s = c.prepareStatement(
        "SELECT a.attname, " + baseTypeOf("a.atttypid") + ", format_type(a.atttypid, a.atttypmod),"
            + " array_position(i.indkey::int2[], a.attnum), c.relreplident"
            + " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            + " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped"
            + " AND a.attgenerated = ''"
            + " LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary"
            + " WHERE n.nspname = ? AND c.relname = ? ORDER BY a.attnum")) {
      s.setString(1, schema);
      s.setString(2, name);
      try (ResultSet rs = s.executeQuery()) {
        while (rs.next()) {
          int keyPosition = rs.getInt(4);
          boolean key = !rs.wasNull();
          Column column = new Column(rs.getString(1), rs.getInt(2), rs.getString(3), key);
          columns.add(column);
          if (key) {
            keyOrder.add(new Object[] {keyPosition, column});
          }
          identity = rs.getString(5);
        }
      }
    }
    keyOrder.sort((a, b) -> Integer.compare((Integer) a[0], (Integer) b[0]));
    List<Column> key = new ArrayList<>();
    keyOrder.forEach(k -> key.add((Column) k[1]));
    return new Table(schema, name, List.copyOf(columns), List.copyOf(key), identity);
  }

  /**
   * SQL for the OID of the type a column of type {@code oid} holds: a domain's base type (through
   * domains over domains), so its values convert as the base type's; any other type itself.
   */
  static String baseTypeOf(String oid) {
    return "(WITH RECURSIVE b(oid, base, typtype) AS (SELECT t.oid, t.typbasetype, t.typtype FROM pg_type t"
        + " WHERE t.oid = " + oid + " UNION ALL SELECT t.oid, t.typbasetype, t.typtype FROM b JOIN pg_type t"
        + " ON t.oid = b.base WHERE b.typtype = 'd') SELECT oid FROM b WHERE typtype <> 'd')";
  }

  static String quote(String identifier) {
    return "\"" + identifier.replace("\"", "\"\"") + "\"";
  }

  static String lsn(long lsn) {
    return PgPosition.lsnText(lsn);
  }
}
