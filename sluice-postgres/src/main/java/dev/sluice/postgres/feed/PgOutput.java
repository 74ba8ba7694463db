package dev.sluice.postgres.feed;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * Decodes the messages of PostgreSQL's built-in logical decoding plugin {@code pgoutput},
 * protocol version 1 (PostgreSQL 10 and later; the "Logical Replication Message Formats" chapter
 * of the PostgreSQL manual): BEGIN, COMMIT, RELATION, TYPE, ORIGIN, INSERT, UPDATE, DELETE,
 * TRUNCATE and MESSAGE. Column values arrive in text format; {@link PgValues} converts them.
 *
 * <p>A message that does not follow the format (a truncated buffer, an unknown tag) is a {@link
 * Malformed} naming what was expected at which offset: the feed stops there rather than skip.
 */
final class PgOutput {
  /** Microseconds between 1970-01-01 and 2000-01-01, PostgreSQL's epoch. */
  private static final long PG_EPOCH_MICROS = 946_684_800_000_000L;

  private PgOutput() {}

  /** One decoded message. */
  sealed interface Message permits Begin, Commit, Relation, Type, Origin, Insert, Update, Delete, Truncate,
      LogicalMessage {}

  /** A transaction starts; {@code finalLsn} is the LSN of its commit record. */
  record Begin(long finalLsn, Instant commitTime, long xid) implements Message {}

  /** A transaction ends; streaming may resume at {@code endLsn} and not see it again. */
  record Commit(long commitLsn, long endLsn, Instant commitTime) implements Message {}

  /** A column of a relation: its name, type, and whether it is part of the replica identity key. */
  record Column(String name, int typeOid, int typeModifier, boolean key) {}

  /** A table's layout, sent before the first change of it in a session and after each change of layout. */
  record Relation(int id, String namespace, String name, char replicaIdentity, List<Column> columns)
      implements Message {
    String qualifiedName() {
      return namespace + "." + name;
    }
  }

  /** A data type's name, sent before a column of a non-built-in type is used. */
  record Type(int oid, String namespace, String name) implements Message {}

  record Origin(long lsn, String name) implements Message {}

  /**
   * One column's value in a tuple: {@code kind} 'n' (null), 'u' (unchanged TOASTed value, not
   * sent), 't' (text) or 'b' (binary; not requested by this feed).
   */
  record Value(char kind, byte[] data) {
    static final Value NULL = new Value('n', null);
    static final Value UNCHANGED = new Value('u', null);

    String text() {
      return data == null ? null : new String(data, StandardCharsets.UTF_8);
    }
  }

  record Insert(int relationId, List<Value> row) implements Message {}

  /**
   * An update. {@code old} is the old key ({@code oldKind} 'K', replica identity DEFAULT or
   * INDEX, sent only when the key changed) or the whole old row ('O', replica identity FULL), or
   * null.
   */
  record Update(int relationId, char oldKind, List<Value> old, List<Value> row) implements Message {}

  record Delete(int relationId, char oldKind, List<Value> old) implements Message {}

  record Truncate(List<Integer> relationIds, boolean cascade, boolean restartIdentity) implements Message {}

  record LogicalMessage(boolean transactional, long lsn, String prefix, byte[] content) implements Message {}

  /** A message that does not follow the pgoutput format. */
  static final class Malformed extends RuntimeException {
    Malformed(String message) {
      super(message);
    }
  }

  static Message decode(ByteBuffer buffer) {
    ByteBuffer b = buffer.slice();
    try {
      char tag = (char) b.get();
      return switch (tag) {
        case 'B' -> new Begin(b.getLong(), time(b.getLong()), Integer.toUnsignedLong(b.getInt()));
        case 'C' -> {
          b.get(); // flags, unused
          long commitLsn = b.getLong();
          long endLsn = b.getLong();
          yield new Commit(commitLsn, endLsn, time(b.getLong()));
        }
        case 'O' -> new Origin(b.getLong(), string(b));
        case 'R' -> relation(b);
        case 'Y' -> new Type(b.getInt(), string(b), string(b));
        case 'I' -> {
          int relation = b.getInt();
          expect(b, 'N', "INSERT");
          yield new Insert(relation, tuple(b));
        }
        case 'U' -> {
          int relation = b.getInt();
          char next = (char) b.get();
          List<Value> old = null;
          char oldKind = 0;
          if (next == 'K' || next == 'O') {
            oldKind = next;
            old = tuple(b);
            next = (char) b.get();
          }
          if (next != 'N') {
            throw new Malformed("UPDATE: expected 'N' before the new row, found '" + next + "'");
          }
          yield new Update(relation, oldKind, old, tuple(b));
        }
        case 'D' -> {
          int relation = b.getInt();
          char kind = (char) b.get();
          if (kind != 'K' && kind != 'O') {
            throw new Malformed("DELETE: expected 'K' or 'O' before the old row, found '" + kind + "'");
          }
          yield new Delete(relation, kind, tuple(b));
        }
        case 'T' -> {
          int count = b.getInt();
          int options = b.get();
          List<Integer> ids = new ArrayList<>(count);
          for (int i = 0; i < count; i++) {
            ids.add(b.getInt());
          }
          yield new Truncate(ids, (options & 1) != 0, (options & 2) != 0);
        }
        case 'M' -> {
          boolean transactional = b.get() == 1;
          long lsn = b.getLong();
          String prefix = string(b);
          byte[] content = new byte[b.getInt()];
          b.get(content);
          yield new LogicalMessage(transactional, lsn, prefix, content);
        }
        default -> throw new Malformed("unknown pgoutput message type '" + tag + "' (protocol version 1 expected)");
      };
    } catch (java.nio.BufferUnderflowException e) {
      throw new Malformed("the message ends early (" + buffer.remaining() + " bytes)");
    }
  }

  private static Relation relation(ByteBuffer b) {
    int id = b.getInt();
    String namespace = string(b);
    String name = string(b);
    char identity = (char) b.get();
    int count = b.getShort();
    List<Column> columns = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      boolean key = (b.get() & 1) != 0;
      columns.add(new Column(string(b), b.getInt(), b.getInt(), key));
    }
    return new Relation(id, namespace, name, identity, List.copyOf(columns));
  }

  private static List<Value> tuple(ByteBuffer b) {
    int count = b.getShort();
    List<Value> values = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      char kind = (char) b.get();
      switch (kind) {
        case 'n' -> values.add(Value.NULL);
        case 'u' -> values.add(Value.UNCHANGED);
        case 't', 'b' -> {
          byte[] data = new byte[b.getInt()];
          b.get(data);
          values.add(new Value(kind, data));
        }
        default -> throw new Malformed("unknown column kind '" + kind + "' in a tuple");
      }
    }
    return values;
  }

  private static void expect(ByteBuffer b, char tag, String what) {
    char found = (char) b.get();
    if (found != tag) {
      throw new Malformed(what + ": expected '" + tag + "', found '" + found + "'");
    }
  }

  private static String string(ByteBuffer b) {
    int start = b.position();
    while (b.get() != 0) {
      // to the terminating zero byte
    }
    byte[] bytes = new byte[b.position() - start - 1];
    b.position(start);
    b.get(bytes);
    b.get(); // the zero
    return new String(bytes, StandardCharsets.UTF_8);
  }

  private static Instant time(long microsSince2000) {
    long micros = microsSince2000 + PG_EPOCH_MICROS;
    return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000);
  }
}
