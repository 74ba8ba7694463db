package dev.sluice.postgres.feed;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The rows of pgoutput's messages ({@link PgOutput}) as a change carries them: the relations the
 * stream described, each relation's key columns, the columns' values converted ({@link PgValues};
 * a domain's by its base type), the canonical key (ADR 0093), the old key of an update that changed
 * it (ADR 0094), and the columns of unchanged TOASTed values that were not sent (ADR 0092).
 */
final class PgRowDecoder {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final PgCatalog catalog;
  private final Map<Integer, PgOutput.Relation> relations = new HashMap<>();
  /** The key columns of each relation, until its next RELATION message. */
  private final Map<Integer, boolean[]> keyColumns = new HashMap<>();

  PgRowDecoder(PgCatalog catalog) {
    this.catalog = catalog;
  }

  /** A RELATION message: the relation's columns from now on; what was known of its table is read again. */
  void described(PgOutput.Relation r) {
    relations.put(r.id(), r);
    catalog.forget(r);
    keyColumns.remove(r.id());
  }

  /** The texts of a row's key columns, in column order (an unchanged TOASTed key's from the old row). */
  List<String> keyTexts(PgOutput.Relation r, List<PgOutput.Value> keySource, List<PgOutput.Value> old) {
    boolean[] keyColumns = keyColumns(r);
    List<String> keyTexts = new ArrayList<>();
    for (int i = 0; i < r.columns().size(); i++) {
      if (keyColumns[i]) {
        keyTexts.add(keyValue(keySource, old, i).text());
      }
    }
    return keyTexts;
  }

  /** A row's key columns' values by name, converted, or an {@link Unconvertible} naming the column. */
  Map<String, Object> documentKey(PgOutput.Relation r, List<PgOutput.Value> keySource, List<PgOutput.Value> old) {
    boolean[] keyColumns = keyColumns(r);
    Map<String, Object> documentKey = new LinkedHashMap<>();
    for (int i = 0; i < r.columns().size(); i++) {
      if (keyColumns[i]) {
        documentKey.put(r.columns().get(i).name(), convert(r, i, keyValue(keySource, old, i).text()));
      }
    }
    return documentKey;
  }

  /** The key's texts ({@link #keyTexts}) by column name, unconverted: for a row that cannot be converted. */
  Map<String, Object> keyByName(PgOutput.Relation r, List<String> keyTexts) {
    boolean[] keyColumns = keyColumns(r);
    Map<String, Object> documentKey = new LinkedHashMap<>();
    int k = 0;
    for (int i = 0; i < r.columns().size(); i++) {
      if (keyColumns[i]) {
        documentKey.put(r.columns().get(i).name(), keyTexts.get(k++));
      }
    }
    return Collections.unmodifiableMap(documentKey);
  }

  /** Every column's text sent, by name: for a row that cannot be converted. */
  static Map<String, Object> columnTexts(PgOutput.Relation r, List<PgOutput.Value> values) {
    Map<String, Object> texts = new LinkedHashMap<>();
    for (int i = 0; i < r.columns().size() && i < values.size(); i++) {
      texts.put(r.columns().get(i).name(), values.get(i).text());
    }
    return Collections.unmodifiableMap(texts);
  }

  PgOutput.Relation relation(int id) {
    PgOutput.Relation r = relations.get(id);
    if (r == null) {
      throw new PgOutput.Malformed("a change of relation " + id + " came before its RELATION message");
    }
    return r;
  }

  /**
   * The columns that make a row's key: the replica identity's, which pgoutput flags; with REPLICA
   * IDENTITY FULL it flags every column, and the primary key is the key.
   */
  boolean[] keyColumns(PgOutput.Relation r) {
    return keyColumns.computeIfAbsent(r.id(), id -> keyColumnsOf(r));
  }

  private boolean[] keyColumnsOf(PgOutput.Relation r) {
    boolean[] out = new boolean[r.columns().size()];
    PgSnapshot.Table table = r.replicaIdentity() == 'f' ? catalog.table(r) : null;
    for (int i = 0; i < out.length; i++) {
      PgOutput.Column c = r.columns().get(i);
      out[i] = table != null && !table.primaryKey().isEmpty()
          ? table.primaryKey().stream().anyMatch(k -> k.name().equals(c.name())) : c.key();
    }
    return out;
  }

  /** A key column's value: the old one when the new row does not carry it (an unchanged TOASTed key). */
  private static PgOutput.Value keyValue(List<PgOutput.Value> source, List<PgOutput.Value> old, int i) {
    PgOutput.Value v = source.get(i);
    return v.kind() == 'u' && old != null ? old.get(i) : v;
  }

  /** Column {@code i}'s value of {@code text}, or an {@link Unconvertible} naming it. */
  Object convert(PgOutput.Relation r, int i, String text) {
    PgOutput.Column c = r.columns().get(i);
    int base = catalog.baseType(r, c.typeOid());
    try {
      return PgValues.convert(base, text);
    } catch (RuntimeException e) {
      String type = catalog.typeName(c.typeOid());
      throw new Unconvertible(c.name(), type != null ? type : PgValues.typeName(c.typeOid()), text, e);
    }
  }

  /**
   * The old key of an update that changed its row's key, or null when the key stayed. pgoutput
   * sends the old key ('K') only when the replica identity's columns changed, or the whole old row
   * ('O') under REPLICA IDENTITY FULL: either way the key columns' texts tell.
   */
  String oldKey(PgOutput.Relation r, List<PgOutput.Value> old, List<String> newKey) {
    boolean[] keyColumns = keyColumns(r);
    List<String> texts = new ArrayList<>();
    for (int i = 0; i < r.columns().size(); i++) {
      if (keyColumns[i]) {
        PgOutput.Value v = i < old.size() ? old.get(i) : null;
        if (v == null || v.kind() == 'u' || v.kind() == 'n') {
          return null; // not sent: the key cannot be compared, and pgoutput sends a changed key whole
        }
        texts.add(v.text());
      }
    }
    return texts.equals(newKey) ? null : key(r.qualifiedName(), texts);
  }

  /** The key columns' values of an old tuple, converted as {@link #values} converts them. */
  Map<String, Object> keyOf(PgOutput.Relation r, Map<String, Object> oldValues) {
    boolean[] keyColumns = keyColumns(r);
    Map<String, Object> out = new LinkedHashMap<>();
    for (int i = 0; i < r.columns().size(); i++) {
      if (keyColumns[i]) {
        String name = r.columns().get(i).name();
        out.put(name, oldValues.get(name));
      }
    }
    return Collections.unmodifiableMap(out);
  }

  /**
   * The columns sent; an unchanged TOASTed value (not sent) taken from {@code whole}, the whole old
   * row, when there is one, else left out ({@link #unchangedColumns} names it).
   */
  Map<String, Object> values(PgOutput.Relation r, List<PgOutput.Value> values,
      List<PgOutput.Value> whole, boolean keyOnly) {
    Map<String, Object> out = new LinkedHashMap<>();
    for (int i = 0; i < r.columns().size() && i < values.size(); i++) {
      PgOutput.Column c = r.columns().get(i);
      PgOutput.Value v = values.get(i);
      if (v.kind() == 'u' && whole != null && i < whole.size()) {
        v = whole.get(i);
      }
      if (v.kind() == 'u' || (keyOnly && v.kind() == 'n' && !c.key())) {
        continue;
      }
      out.put(c.name(), convert(r, i, v.text()));
    }
    return out;
  }

  /** The columns of {@code values} not sent (unchanged TOASTed) that {@code whole} does not have either. */
  static List<String> unchangedColumns(PgOutput.Relation r, List<PgOutput.Value> values,
      List<PgOutput.Value> whole) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < r.columns().size() && i < values.size(); i++) {
      if (values.get(i).kind() == 'u' && (whole == null || i >= whole.size() || whole.get(i).kind() == 'u')) {
        out.add(r.columns().get(i).name());
      }
    }
    return List.copyOf(out);
  }

  static boolean oldIsWholeRow(PgOutput.Relation r) {
    return r.replicaIdentity() == 'f';
  }

  /**
   * The canonical key: the table and a JSON array of the key columns' texts, {@code public.t["1"]}
   * or {@code public.t["1","x"]}, so that rows of different tables never share a key, a partition's
   * key order, a parked key or a Kafka record key (ADR 0093). Empty for a change of no row.
   */
  static String key(String table, List<String> parts) {
    if (parts.isEmpty()) {
      return "";
    }
    try {
      return table + JSON.writeValueAsString(parts);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * A row as positions name it ({@code uncovered}): the key form before ADR 0093 (a single column's
   * bare text), kept so that positions written by earlier versions still name the same rows.
   */
  static String rowId(String table, List<String> parts) {
    String key = parts.size() == 1 ? (parts.get(0) == null ? "null" : parts.get(0)) : key(table, parts);
    return table + "\t" + key;
  }

  /** A message's content as text when it is UTF-8 (as {@code pg_logical_emit_message(bool, text, text)} writes), else its bytes. */
  static Object content(byte[] bytes) {
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes)).toString();
    } catch (CharacterCodingException e) {
      return bytes;
    }
  }
}
