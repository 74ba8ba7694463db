package dev.sluice.jdbc.deadletter;

import dev.sluice.SluiceException;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.deadletter.StaleParkException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Function;
import javax.sql.DataSource;

final class JdbcDeadLetterStoreImpl<D> implements JdbcDeadLetterStore<D> {
  private static final String COLUMNS =
      "event_id, stream, event_key, partition_no, error, attempts, parked_at, position_token, "
          + "position_time, operation, document_key, document, event_time, epoch, document_state, changed_fields, "
          + "before_document";

  private final DataSource dataSource;
  private final String table;
  /** Per (stream, partition): the highest lease epoch that parked there (ADR 0045). */
  private final String epochs;
  private final Function<D, String> encode;
  private final Function<String, D> decode;

  JdbcDeadLetterStoreImpl(DataSource dataSource, String table, Function<D, String> encode, Function<String, D> decode) {
    this.dataSource = dataSource;
    this.table = table;
    this.epochs = table + "_epochs";
    this.encode = encode;
    this.decode = decode;
  }

  @Override
  public void createTable() {
    try (Connection c = dataSource.getConnection(); Statement s = c.createStatement()) {
      String product = c.getMetaData().getDatabaseProductName().toLowerCase(Locale.ROOT);
      boolean postgres = product.contains("postgres");
      String seq = postgres ? "BIGSERIAL PRIMARY KEY" : "BIGINT AUTO_INCREMENT PRIMARY KEY";
      String text = postgres ? "TEXT" : "LONGTEXT";
      s.execute("CREATE TABLE IF NOT EXISTS " + table + " ("
          + "seq " + seq + ", "
          + "event_id VARCHAR(500) NOT NULL, stream VARCHAR(200) NOT NULL, event_key VARCHAR(1000) NOT NULL, "
          + "partition_no INT NOT NULL, error " + text + " NOT NULL, attempts INT NOT NULL, "
          + "parked_at TIMESTAMP NOT NULL, position_token " + text + " NOT NULL, position_time VARCHAR(40), "
          + "operation VARCHAR(20) NOT NULL, document_key " + text + ", document " + text + ", "
          + "event_time VARCHAR(40), epoch BIGINT NOT NULL DEFAULT 0, document_state VARCHAR(20), "
          + "changed_fields " + text + ", before_document " + text + ", "
          + "UNIQUE (stream, event_id))");
      // Tables created before epochs were recorded (ADR 0045): existing entries get epoch 0.
      s.execute("ALTER TABLE " + table + " ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0");
      // Tables created before the document state was recorded: their rows read as before.
      s.execute("ALTER TABLE " + table + " ADD COLUMN IF NOT EXISTS document_state VARCHAR(20)");
      s.execute("ALTER TABLE " + table + " ADD COLUMN IF NOT EXISTS changed_fields " + text);
      s.execute("ALTER TABLE " + table + " ADD COLUMN IF NOT EXISTS before_document " + text);
      // MariaDB limits index keys to 3072 bytes: index a prefix of the key there.
      s.execute("CREATE INDEX IF NOT EXISTS " + table + "_key ON " + table + " (stream, "
          + (postgres ? "event_key" : "event_key(255)") + ")");
      s.execute("CREATE INDEX IF NOT EXISTS " + table + "_partition ON " + table
          + " (stream, partition_no, seq)");
      s.execute("CREATE TABLE IF NOT EXISTS " + epochs + " (stream VARCHAR(200) NOT NULL, "
          + "partition_no INT NOT NULL, epoch BIGINT NOT NULL, PRIMARY KEY (stream, partition_no))");
      if (!c.getAutoCommit()) {
        c.commit();
      }
    } catch (SQLException e) {
      throw new SluiceException("Cannot create dead-letter table " + table + ": " + e.getMessage(), e);
    }
  }

  @Override
  public void park(ParkedChange<D> change) {
    ChangeEvent<D> e = change.event();
    try (Connection c = dataSource.getConnection()) {
      boolean autoCommit = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        if (exists(c, change.scope(), e.id())) {
          c.commit();
          return; // idempotent: parked before (a redelivery after a crash)
        }
        if (change.epoch() > 0) {
          // Holds the partition's epoch row until commit: parks of one partition are serialised,
          // and one from an epoch older than the latest is refused (ADR 0045).
          raiseEpoch(c, change.scope(), change.partition(), change.epoch());
        }
        insert(c, change);
        c.commit();
      } catch (SQLException | RuntimeException ex) {
        c.rollback();
        if (ex instanceof SQLException && exists(c, change.scope(), e.id())) {
          c.commit();
          return; // a concurrent park of the same change won the unique key: one entry is kept
        }
        throw ex;
      } finally {
        c.setAutoCommit(autoCommit);
      }
    } catch (SQLException ex) {
      throw new SluiceException("Cannot park change " + e.id() + " (" + e + ") in " + table + ": " + ex.getMessage(), ex);
    }
  }

  private void raiseEpoch(Connection c, String stream, int partition, long epoch) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("UPDATE " + epochs
        + " SET epoch = ? WHERE stream = ? AND partition_no = ? AND epoch <= ?")) {
      ps.setLong(1, epoch);
      ps.setString(2, stream);
      ps.setInt(3, partition);
      ps.setLong(4, epoch);
      if (ps.executeUpdate() == 1) {
        return;
      }
    }
    try (PreparedStatement ps = c.prepareStatement(
        "SELECT epoch FROM " + epochs + " WHERE stream = ? AND partition_no = ?")) {
      ps.setString(1, stream);
      ps.setInt(2, partition);
      try (ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          throw new StaleParkException(stream, partition, epoch, rs.getLong(1));
        }
      }
    }
    // No row yet. A concurrent first park may insert it too: the loser's unique-key error rolls
    // its park back and it is retried by the caller.
    try (PreparedStatement ps = c.prepareStatement(
        "INSERT INTO " + epochs + " (stream, partition_no, epoch) VALUES (?, ?, ?)")) {
      ps.setString(1, stream);
      ps.setInt(2, partition);
      ps.setLong(3, epoch);
      ps.executeUpdate();
    }
  }

  private void insert(Connection c, ParkedChange<D> change) throws SQLException {
    ChangeEvent<D> e = change.event();
    try (PreparedStatement ps = c.prepareStatement(
        "INSERT INTO " + table + " (" + COLUMNS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")) {
      ps.setString(1, e.id());
      ps.setString(2, change.scope());
      ps.setString(3, e.key());
      ps.setInt(4, change.partition());
      ps.setString(5, change.error());
      ps.setInt(6, change.attempts());
      ps.setTimestamp(7, Timestamp.from(change.parkedAt()));
      ps.setString(8, e.position().token());
      ps.setString(9, e.position().time() == null ? null : e.position().time().toString());
      ps.setString(10, e.operation().name());
      ps.setString(11, e.documentKey() == null ? null : encode.apply(e.documentKey()));
      ps.setString(12, e.document() == null ? null : encode.apply(e.document()));
      ps.setString(13, e.time() == null ? null : e.time().toString());
      ps.setLong(14, change.epoch());
      ps.setString(15, e.documentState().name());
      ps.setString(16, e.changedFields() == null ? null : encode.apply(e.changedFields()));
      ps.setString(17, e.before() == null ? null : encode.apply(e.before()));
      ps.executeUpdate();
    }
  }

  private boolean exists(Connection c, String stream, String eventId) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("SELECT 1 FROM " + table + " WHERE stream = ? AND event_id = ?")) {
      ps.setString(1, stream);
      ps.setString(2, eventId);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next();
      }
    }
  }

  @Override
  public boolean hasParked(String stream, int partition, String key) {
    boolean[] found = {false};
    query("SELECT 1 FROM " + table + " WHERE stream = ? AND event_key = ? AND partition_no = ?",
        ps -> {
          ps.setString(1, stream);
          ps.setString(2, key);
          ps.setInt(3, partition);
          ps.setMaxRows(1);
        },
        rs -> found[0] = true);
    return found[0];
  }

  @Override
  public Set<String> parkedKeys(String stream, int partition, int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be >= 1, but was " + limit);
    }
    Set<String> keys = new LinkedHashSet<>();
    query("SELECT event_key, MIN(seq) AS first_seq FROM " + table
            + " WHERE stream = ? AND partition_no = ? GROUP BY event_key ORDER BY first_seq",
        ps -> {
          ps.setString(1, stream);
          ps.setInt(2, partition);
          ps.setMaxRows(limit);
        },
        rs -> keys.add(rs.getString(1)));
    return keys;
  }

  @Override
  public List<ParkedChange<D>> list(String stream, int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be >= 1, but was " + limit);
    }
    List<ParkedChange<D>> out = new ArrayList<>();
    query("SELECT " + COLUMNS + " FROM " + table + " WHERE stream = ? ORDER BY seq",
        ps -> {
          ps.setString(1, stream);
          ps.setMaxRows(limit);
        },
        rs -> out.add(read(rs)));
    return out;
  }

  @Override
  public List<ParkedChange<D>> listKey(String stream, String key) {
    List<ParkedChange<D>> out = new ArrayList<>();
    query("SELECT " + COLUMNS + " FROM " + table + " WHERE stream = ? AND event_key = ? ORDER BY seq",
        ps -> {
          ps.setString(1, stream);
          ps.setString(2, key);
        },
        rs -> out.add(read(rs)));
    return out;
  }

  @Override
  public boolean remove(String stream, String eventId) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement("DELETE FROM " + table + " WHERE stream = ? AND event_id = ?")) {
      ps.setString(1, stream);
      ps.setString(2, eventId);
      return ps.executeUpdate() == 1;
    } catch (SQLException e) {
      throw new SluiceException("Cannot remove " + eventId + " from " + table + ": " + e.getMessage(), e);
    }
  }

  @Override
  public long count(String stream) {
    long[] n = {0};
    query("SELECT COUNT(*) FROM " + table + " WHERE stream = ?", ps -> ps.setString(1, stream), rs -> n[0] = rs.getLong(1));
    return n[0];
  }

  private ParkedChange<D> read(ResultSet rs) throws SQLException {
    String positionTime = rs.getString("position_time");
    String eventTime = rs.getString("event_time");
    String documentKey = rs.getString("document_key");
    String document = rs.getString("document");
    String scope = rs.getString("stream");
    String state = rs.getString("document_state");
    String changed = rs.getString("changed_fields");
    String before = rs.getString("before_document");
    D decodedDocument = document == null ? null : decode.apply(document);
    ChangeEvent<D> event = new ChangeEvent<>(
        rs.getString("event_id"),
        scope.substring(scope.lastIndexOf('/') + 1), // the scope is group/stream; streams have no '/'
        new Position(rs.getString("position_token"), positionTime == null ? null : Instant.parse(positionTime)),
        Operation.valueOf(rs.getString("operation")),
        rs.getString("event_key"),
        documentKey == null ? null : decode.apply(documentKey),
        decodedDocument,
        eventTime == null ? null : Instant.parse(eventTime),
        null,
        state != null ? DocumentState.valueOf(state)
            : decodedDocument == null ? DocumentState.NONE : DocumentState.AFTER_CHANGE,
        changed == null ? null : decode.apply(changed),
        before == null ? null : decode.apply(before));
    return new ParkedChange<>(event, rs.getInt("partition_no"), rs.getString("error"), rs.getInt("attempts"),
        rs.getTimestamp("parked_at").toInstant(), rs.getLong("epoch"), scope);
  }

  private interface Binder {
    void bind(PreparedStatement ps) throws SQLException;
  }

  private interface RowReader {
    void read(ResultSet rs) throws SQLException;
  }

  private void query(String sql, Binder binder, RowReader reader) {
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      binder.bind(ps);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          reader.read(rs);
        }
      }
    } catch (SQLException e) {
      throw new SluiceException("Dead-letter table " + table + " unavailable: " + e.getMessage(), e);
    }
  }
}
