package dev.sluice.postgres.feed;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.sluice.feed.Position;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.postgresql.replication.LogSequenceNumber;

/**
 * A PostgreSQL feed position. Resuming always starts at a transaction boundary, {@code lsn}: the
 * end of the last transaction read whole, where the slot can start again. A position inside a
 * transaction (after its {@code rows}-th change of this feed's tables) keeps that boundary and
 * names the transaction ({@code xid}): resuming re-reads the transaction from its start and skips
 * the changes already processed, so a checkpoint taken inside a transaction neither loses nor
 * repeats any of its changes. Token: {@code 0/16B3748} or {@code 0/16B3748 xid=745 rows=3}. The
 * transaction's logical-decoding messages are counted apart from its rows ({@code
 * 0/16B3748 xid=745 rows=3 messages=1}, ADR 0096): the server sends them only to a feed that asks,
 * so the row count means the same whether or not the feed that wrote it asked. An update that
 * changes a row's key is delivered as two changes, the old key's delete and the new key's insert
 * (issue 33 defect 4, ADR 0094); the position between them counts the rows before it and the
 * first change of the next: {@code 0/16B3748 xid=745 rows=2+1}.
 *
 * <p>During a snapshot bootstrap ({@link PgSnapshot}) the position also says how far the snapshot
 * read ({@code snapshot}: the table being read and the key of the last row read), and after a
 * restart in the middle of a snapshot which key ranges were read in a later snapshot ({@code
 * covers}): changes of those rows committed before that snapshot are already in it and are not
 * delivered again. Both follow the LSN as one JSON object: {@code 0/16B3748
 * {"snapshot":{"table":"public.t","after":["42"]},"cover":[...]}}.
 *
 * @param lsn the transaction boundary to stream from (during a snapshot: the slot's start)
 * @param xid the transaction partly processed, or 0 when the position is at the boundary
 * @param rows how many of that transaction's changes were processed
 * @param snapshot where the snapshot stands, or null when it is complete (or there was none)
 * @param covers the key ranges read in later snapshots, in key order
 * @param uncovered what no cover leaves out any more: a table truncated while covers apply (the
 *     consumer emptied it, so what a later snapshot held must come again), or one row ({@code
 *     table<TAB>key}) whose key an update moved into a covered range (the consumer got that older
 *     state after the snapshot's newer one, so the row's later changes must come too)
 * @param part how many changes of the transaction's next row were processed too: 1 after the old
 *     key's delete of a key-changing update, whose new key's insert is still to come; else 0
 * @param messages how many of that transaction's logical-decoding messages were processed
 */
record PgPosition(long lsn, long xid, long rows, SnapshotAt snapshot, List<Cover> covers, Set<String> uncovered,
    int part, long messages) {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final Pattern TOKEN = Pattern.compile("([0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8})"
      + "(?: xid=(\\d+) rows=(\\d+)(?:\\+(1))?(?: messages=(\\d+))?)?(?: (\\{.*\\}))?");

  /**
   * A snapshot in progress: it is reading {@code table} (qualified name), rows with a primary key
   * greater than {@code after} (the key columns' texts; null: from the table's first row).
   */
  record SnapshotAt(String table, List<String> after) {}

  /**
   * The rows of {@code table} with a primary key greater than {@code after} (null: all its rows),
   * and all rows of the tables after it, were read in a snapshot consistent at {@code lsn}.
   */
  record Cover(String table, List<String> after, long lsn) {}

  PgPosition {
    covers = List.copyOf(covers);
    uncovered = Set.copyOf(uncovered);
    if (part != 0 && (part != 1 || xid == 0)) {
      throw new IllegalArgumentException("part " + part + " outside a transaction or above 1");
    }
  }

  PgPosition(long lsn, long xid, long rows, SnapshotAt snapshot, List<Cover> covers, Set<String> uncovered) {
    this(lsn, xid, rows, snapshot, covers, uncovered, 0, 0);
  }

  PgPosition(long lsn, long xid, long rows, SnapshotAt snapshot, List<Cover> covers) {
    this(lsn, xid, rows, snapshot, covers, Set.of());
  }

  PgPosition(long lsn, long xid, long rows) {
    this(lsn, xid, rows, null, List.of());
  }

  static PgPosition boundary(long lsn) {
    return new PgPosition(lsn, 0, 0);
  }

  boolean inside() {
    return xid != 0;
  }

  /**
   * {@code lsn} as PostgreSQL writes it ({@code 16/B374D848}: the high and low 32 bits in upper-case
   * hex), the text of pgjdbc's {@code LogSequenceNumber.asString()} without its {@code String.format},
   * which a change's position and id paid twice per change.
   */
  static String lsnText(long lsn) {
    StringBuilder b = new StringBuilder(17);
    hex(b, (int) (lsn >>> 32));
    b.append('/');
    hex(b, (int) lsn);
    return b.toString();
  }

  private static void hex(StringBuilder b, int v) {
    int digits = Math.max(1, (Integer.SIZE - Integer.numberOfLeadingZeros(v) + 3) / 4);
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) {
      b.append(Character.toUpperCase(Character.forDigit((v >>> shift) & 0xF, 16)));
    }
  }

  Position toPosition(Instant time) {
    String at = lsnText(lsn);
    StringBuilder token = new StringBuilder(at);
    if (inside()) {
      token.append(" xid=").append(xid).append(" rows=").append(rows);
      if (part != 0) {
        token.append('+').append(part);
      }
      if (messages > 0) {
        token.append(" messages=").append(messages);
      }
    }
    if (snapshot != null || !covers.isEmpty()) {
      ObjectNode extra = JSON.createObjectNode();
      if (snapshot != null) {
        ObjectNode s = extra.putObject("snapshot");
        s.put("table", snapshot.table());
        keyTo(s, "after", snapshot.after());
      }
      if (!covers.isEmpty()) {
        ArrayNode cs = extra.putArray("cover");
        for (Cover c : covers) {
          ObjectNode o = cs.addObject();
          o.put("table", c.table());
          keyTo(o, "after", c.after());
          o.put("lsn", lsnText(c.lsn()));
        }
      }
      if (!uncovered.isEmpty()) {
        ArrayNode ts = extra.putArray("uncovered");
        new java.util.TreeSet<>(uncovered).forEach(ts::add);
      }
      try {
        token.append(' ').append(JSON.writeValueAsString(extra));
      } catch (JsonProcessingException e) {
        throw new IllegalStateException(e);
      }
    }
    return new Position(token.toString(), time);
  }

  private static void keyTo(ObjectNode node, String field, List<String> key) {
    if (key == null) {
      return;
    }
    ArrayNode a = node.putArray(field);
    key.forEach(a::add);
  }

  /** The position a token names, or an IllegalArgumentException saying what a token looks like. */
  static PgPosition parse(Position position) {
    Matcher m = TOKEN.matcher(position.token().trim());
    if (!m.matches()) {
      throw new IllegalArgumentException("'" + position.token() + "' is not a PostgreSQL feed position"
          + " (an LSN such as 0/16B3748, optionally followed by ' xid=<n> rows=<n>', ' xid=<n> rows=<n>+1'"
          + " and ' messages=<n>')");
    }
    long lsn = LogSequenceNumber.valueOf(m.group(1)).asLong();
    long xid = m.group(2) == null ? 0 : Long.parseLong(m.group(2));
    long rows = m.group(2) == null ? 0 : Long.parseLong(m.group(3));
    int part = m.group(4) == null ? 0 : 1;
    long messages = m.group(5) == null ? 0 : Long.parseLong(m.group(5));
    if (m.group(6) == null) {
      return new PgPosition(lsn, xid, rows, null, List.of(), Set.of(), part, messages);
    }
    try {
      JsonNode extra = JSON.readTree(m.group(6));
      SnapshotAt snapshot = null;
      JsonNode s = extra.get("snapshot");
      if (s != null) {
        snapshot = new SnapshotAt(text(s, "table"), key(s.get("after")));
      }
      List<Cover> covers = new ArrayList<>();
      JsonNode cs = extra.get("cover");
      if (cs != null) {
        for (JsonNode c : cs) {
          covers.add(new Cover(text(c, "table"), key(c.get("after")),
              LogSequenceNumber.valueOf(text(c, "lsn")).asLong()));
        }
      }
      Set<String> uncovered = new java.util.HashSet<>();
      JsonNode ts = extra.get("uncovered");
      if (ts != null) {
        ts.forEach(t -> uncovered.add(t.asText()));
      }
      return new PgPosition(lsn, xid, rows, snapshot, covers, uncovered, part, messages);
    } catch (JsonProcessingException | RuntimeException e) {
      throw new IllegalArgumentException("'" + position.token() + "' is not a PostgreSQL feed position: its"
          + " snapshot part cannot be read (" + e.getMessage() + ")");
    }
  }

  private static String text(JsonNode node, String field) {
    JsonNode v = node.get(field);
    if (v == null || !v.isTextual()) {
      throw new IllegalArgumentException("'" + field + "' is missing");
    }
    return v.asText();
  }

  private static List<String> key(JsonNode node) {
    if (node == null || node.isNull()) {
      return null;
    }
    List<String> out = new ArrayList<>();
    node.forEach(v -> out.add(v.asText()));
    return List.copyOf(out);
  }
}
