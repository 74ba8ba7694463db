package dev.sluice.mongodb.deadletter;

import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.FindOneAndDeleteOptions;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.IndexOptions;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.ReturnDocument;
import com.mongodb.client.model.Sorts;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import dev.sluice.deadletter.ParkedChange;
import dev.sluice.deadletter.StaleParkException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.DocumentState;
import dev.sluice.feed.Operation;
import dev.sluice.feed.Position;
import dev.sluice.mongodb.internal.MongoErrors;
import dev.sluice.mongodb.internal.MongoReads;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Date;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.bson.BsonBinary;
import org.bson.BsonBinaryWriter;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonInt32;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonObjectId;
import org.bson.BsonString;
import org.bson.BsonValue;
import org.bson.RawBsonDocument;
import org.bson.codecs.BsonDocumentCodec;
import org.bson.codecs.EncoderContext;
import org.bson.conversions.Bson;
import org.bson.io.BasicOutputBuffer;
import org.bson.types.ObjectId;

final class MongoDeadLetterStoreImpl implements MongoDeadLetterStore {
  /** MongoDB's largest document. */
  private static final int MAX_DOCUMENT = 16 * 1024 * 1024;
  /** Room left in an entry for its other fields (the error message is capped below it). */
  private static final int INLINE_MARGIN = 256 * 1024;
  /** Size of one piece of a chunked change. */
  private static final int CHUNK = 8 * 1024 * 1024;
  /** How old pieces without an entry must be before they are removed. */
  private static final java.time.Duration ORPHAN_AGE = java.time.Duration.ofHours(1);
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(MongoDeadLetterStoreImpl.class);
  /** Longest error message kept with an entry. */
  private static final int MAX_ERROR_CHARS = 32 * 1024;
  private final MongoCollection<BsonDocument> entries;
  private final MongoCollection<BsonDocument> counters;
  /** Per (stream, partition): the highest lease epoch that parked there, to refuse stale parks. */
  private final MongoCollection<BsonDocument> epochs;
  /** Pieces of parked changes too large to fit one document (docs/adr/0059). */
  private final MongoCollection<BsonDocument> chunks;
  private final String name;

  MongoDeadLetterStoreImpl(MongoDatabase database, String collection) {
    this.name = collection;
    // A dead letter is the only copy of a change that failed: majority-written, and read on the
    // primary, so a new owner's parked-key check sees every park of the previous owner.
    this.entries = MongoReads.ownRecords(database.getCollection(collection, BsonDocument.class));
    this.counters = MongoReads.ownRecords(database.getCollection(collection + "_seq", BsonDocument.class));
    this.epochs = MongoReads.ownRecords(database.getCollection(collection + "_epochs", BsonDocument.class));
    this.chunks = MongoReads.ownRecords(database.getCollection(collection + "_chunks", BsonDocument.class));
    entries.createIndex(
        Indexes.ascending("stream", "eventId"), new IndexOptions().unique(true).name("stream_eventId"));
    entries.createIndex(Indexes.ascending("stream", "key", "seq"), new IndexOptions().name("stream_key_seq"));
    entries.createIndex(Indexes.ascending("stream", "seq"), new IndexOptions().name("stream_seq"));
    entries.createIndex(Indexes.ascending("stream", "partition", "seq"),
        new IndexOptions().name("stream_partition_seq"));
  }

  @Override
  public void park(ParkedChange<BsonDocument> change) {
    try {
      store(change);
    } catch (com.mongodb.MongoException e) {
      // The engine retries until the change is parked and shows this in the partition's status:
      // name the server's answer there (a write concern error's own message names no code).
      throw new dev.sluice.SluiceException("MongoDB dead-letter store could not park the change of key "
          + change.event().key() + ": " + MongoErrors.describe(e), e);
    }
  }

  private void store(ParkedChange<BsonDocument> change) {
    ChangeEvent<BsonDocument> e = change.event();
    String scope = change.scope();
    if (entries.find(Filters.and(Filters.eq("stream", scope), Filters.eq("eventId", e.id())))
            .limit(1)
            .first()
        != null) {
      return; // idempotent: parked before (a redelivery after a crash)
    }
    String partitionId = scope + "#" + change.partition();
    if (change.epoch() > 0) {
      raiseEpoch(partitionId, scope, change.partition(), change.epoch());
    }
    BsonObjectId id = new BsonObjectId();
    BsonDocument doc =
        new BsonDocument("_id", id)
            .append("stream", new BsonString(scope))
            .append("eventId", new BsonString(e.id()))
            .append("key", new BsonString(e.key()))
            .append("partition", new BsonInt32(change.partition()))
            .append("seq", new BsonInt64(nextSeq()))
            .append("epoch", new BsonInt64(change.epoch()))
            .append("error", new BsonString(capped(change.error())))
            .append("attempts", new BsonInt32(change.attempts()))
            .append("parkedAt", new BsonDateTime(change.parkedAt().toEpochMilli()));
    byte[] event = bytes(encode(e));
    boolean chunked = event.length + INLINE_MARGIN > MAX_DOCUMENT;
    if (chunked) {
      removeOrphanPieces();
      // Too large for one document (a reassembled split event, or one close to 16 MB plus what
      // the entry adds): the pieces first, then the entry that refers to them, so an entry never
      // refers to missing pieces.
      int n = 0;
      for (int from = 0; from < event.length; from += CHUNK, n++) {
        chunks.insertOne(new BsonDocument("_id", new BsonDocument("entry", id).append("n", new BsonInt32(n)))
            .append("data", new BsonBinary(Arrays.copyOfRange(event, from, Math.min(event.length, from + CHUNK)))));
      }
      doc.append("eventChunks", new BsonInt32(n)).append("eventBytes", new BsonInt32(event.length));
    } else {
      doc.append("event", new RawBsonDocument(event));
    }
    try {
      entries.insertOne(doc);
    } catch (MongoWriteException ex) {
      if (chunked) {
        chunks.deleteMany(Filters.eq("_id.entry", id));
      }
      if (!MongoErrors.isDuplicateKey(ex)) {
        throw ex;
      }
      return; // lost a race against a concurrent park of the same change: one entry is kept
    }
    if (change.epoch() > 0) {
      // A newer owner may have raised the epoch between our check and our insert: then our entry
      // could sort after its entries. Take it back; the newer owner reads the change again.
      long latest = latestEpoch(partitionId);
      if (latest > change.epoch()) {
        entries.deleteOne(Filters.eq("_id", id));
        chunks.deleteMany(Filters.eq("_id.entry", id));
        throw new StaleParkException(scope, change.partition(), change.epoch(), latest);
      }
    }
  }

  private void raiseEpoch(String partitionId, String stream, int partition, long epoch) {
    try {
      epochs.updateOne(Filters.and(Filters.eq("_id", partitionId), Filters.lte("epoch", epoch)),
          Updates.set("epoch", epoch), new UpdateOptions().upsert(true));
    } catch (MongoWriteException ex) {
      if (!MongoErrors.isDuplicateKey(ex)) {
        throw ex;
      }
      // The record exists with a higher epoch, so the upsert tried to insert a second one.
      throw new StaleParkException(stream, partition, epoch, latestEpoch(partitionId));
    }
  }

  private long latestEpoch(String partitionId) {
    BsonDocument d = epochs.find(Filters.eq("_id", partitionId)).first();
    return d == null ? 0 : d.get("epoch").asNumber().longValue();
  }

  private long nextSeq() {
    BsonDocument counter =
        counters.findOneAndUpdate(
            Filters.eq("_id", name),
            Updates.inc("seq", 1L),
            new FindOneAndUpdateOptions().upsert(true).returnDocument(ReturnDocument.AFTER));
    return counter.get("seq").asNumber().longValue();
  }

  @Override
  public boolean hasParked(String stream, int partition, String key) {
    return entries.find(Filters.and(Filters.eq("stream", stream), Filters.eq("key", key),
            Filters.eq("partition", partition)))
        .projection(new BsonDocument("_id", new BsonInt32(1))).limit(1).first() != null;
  }

  @Override
  public Set<String> parkedKeys(String stream, int partition, int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be >= 1, but was " + limit);
    }
    Set<String> keys = new LinkedHashSet<>();
    try (var cursor = entries
        .find(Filters.and(Filters.eq("stream", stream), Filters.eq("partition", partition)))
        .projection(new BsonDocument("key", new BsonInt32(1)))
        .sort(Sorts.ascending("seq"))
        .batchSize(Math.min(limit, 1000))
        .iterator()) {
      while (cursor.hasNext() && keys.size() < limit) {
        keys.add(cursor.next().getString("key").getValue());
      }
    }
    return keys;
  }

  @Override
  public List<ParkedChange<BsonDocument>> list(String stream, int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be >= 1, but was " + limit);
    }
    return read(Filters.eq("stream", stream), limit);
  }

  @Override
  public List<ParkedChange<BsonDocument>> listKey(String stream, String key) {
    return read(Filters.and(Filters.eq("stream", stream), Filters.eq("key", key)), 0);
  }

  @Override
  public boolean remove(String stream, String eventId) {
    BsonDocument removed = entries.findOneAndDelete(
        Filters.and(Filters.eq("stream", stream), Filters.eq("eventId", eventId)),
        new FindOneAndDeleteOptions().projection(Projections.include("_id", "eventChunks")));
    if (removed != null && removed.containsKey("eventChunks")) {
      chunks.deleteMany(Filters.eq("_id.entry", removed.get("_id")));
    }
    return removed != null;
  }

  /**
   * Pieces whose entry was never written (a crash between the pieces and the entry) and that are
   * older than an hour: no park in flight can still write their entry, and nothing refers to them.
   */
  private void removeOrphanPieces() {
    BsonObjectId hourAgo = new BsonObjectId(new ObjectId(Date.from(Instant.now().minus(ORPHAN_AGE))));
    Set<BsonValue> candidates = new LinkedHashSet<>();
    for (BsonDocument c : chunks.find(Filters.lt("_id.entry", hourAgo)).projection(Projections.include("_id"))) {
      candidates.add(c.getDocument("_id").get("entry"));
    }
    for (BsonValue entry : candidates) {
      if (entries.find(Filters.eq("_id", entry)).projection(Projections.include("_id")).first() == null) {
        long n = chunks.deleteMany(Filters.eq("_id.entry", entry)).getDeletedCount();
        log.info("Dead-letter store {}: removed {} orphan piece(s) of an entry that was never written", name, n);
      }
    }
  }

  private static String capped(String error) {
    return error.length() <= MAX_ERROR_CHARS ? error
        : error.substring(0, MAX_ERROR_CHARS) + "... (" + (error.length() - MAX_ERROR_CHARS) + " more characters)";
  }

  private static byte[] bytes(BsonDocument d) {
    BasicOutputBuffer out = new BasicOutputBuffer();
    new BsonDocumentCodec().encode(new BsonBinaryWriter(out), d, EncoderContext.builder().build());
    return out.toByteArray();
  }

  /** The parked change of an entry, inline or put together from its pieces. */
  private BsonDocument event(BsonDocument entry) {
    if (!entry.containsKey("eventChunks")) {
      return entry.getDocument("event");
    }
    int n = entry.getInt32("eventChunks").getValue();
    byte[] all = new byte[entry.getInt32("eventBytes").getValue()];
    int at = 0;
    int seen = 0;
    for (BsonDocument c : chunks.find(Filters.eq("_id.entry", entry.get("_id"))).sort(Sorts.ascending("_id.n"))) {
      byte[] piece = c.getBinary("data").getData();
      System.arraycopy(piece, 0, all, at, piece.length);
      at += piece.length;
      seen++;
    }
    if (seen != n || at != all.length) {
      throw new IllegalStateException("Dead letter " + entry.get("_id") + " of " + entry.get("stream")
          + ": " + seen + " of its " + n + " pieces (" + at + " of " + all.length + " bytes) are in "
          + chunks.getNamespace() + "; was that collection changed by hand?");
    }
    return new RawBsonDocument(all);
  }

  @Override
  public long count(String stream) {
    return entries.countDocuments(Filters.eq("stream", stream));
  }

  private List<ParkedChange<BsonDocument>> read(Bson filter, int limit) {
    List<ParkedChange<BsonDocument>> out = new ArrayList<>();
    for (BsonDocument d : entries.find(filter).sort(Sorts.ascending("seq")).limit(limit)) {
      out.add(
          new ParkedChange<>(
              decode(event(d)),
              d.getInt32("partition").getValue(),
              d.getString("error").getValue(),
              d.getInt32("attempts").getValue(),
              Instant.ofEpochMilli(d.getDateTime("parkedAt").getValue()),
              d.containsKey("epoch") ? d.get("epoch").asNumber().longValue() : 0,
              d.getString("stream").getValue()));
    }
    return out;
  }

  private static BsonDocument encode(ChangeEvent<BsonDocument> e) {
    BsonDocument position = new BsonDocument("token", new BsonString(e.position().token()));
    position.append("time", time(e.position().time()));
    return new BsonDocument("id", new BsonString(e.id()))
        .append("stream", new BsonString(e.stream()))
        .append("position", position)
        .append("operation", new BsonString(e.operation().name()))
        .append("key", new BsonString(e.key()))
        .append("documentKey", orNull(e.documentKey()))
        .append("document", orNull(e.document()))
        .append("time", time(e.time()))
        .append("raw", e.raw() instanceof BsonDocument raw ? raw : BsonNull.VALUE)
        .append("documentState", new BsonString(e.documentState().name()))
        .append("changedFields", orNull(e.changedFields()))
        .append("before", orNull(e.before()));
  }

  private static ChangeEvent<BsonDocument> decode(BsonDocument d) {
    BsonDocument p = d.getDocument("position");
    Operation operation = Operation.valueOf(d.getString("operation").getValue());
    BsonDocument document = doc(d.get("document"));
    BsonDocument raw = doc(d.get("raw"));
    DocumentState state;
    BsonDocument changed;
    if (d.isString("documentState")) {
      state = DocumentState.valueOf(d.getString("documentState").getValue());
      changed = doc(d.get("changedFields"));
    } else {
      // Parked before the state was recorded: updates were read with updateLookup, so their
      // document is a lookup; what the change did is still in the raw event.
      boolean update = operation == Operation.UPDATE;
      state = update ? DocumentState.CURRENT : document == null ? DocumentState.NONE : DocumentState.AFTER_CHANGE;
      BsonValue description = raw == null ? null : raw.get("updateDescription");
      changed = update && description != null && description.isDocument()
          ? doc(description.asDocument().get("updatedFields")) : null;
    }
    return new ChangeEvent<>(
        d.getString("id").getValue(),
        d.getString("stream").getValue(),
        new Position(p.getString("token").getValue(), instant(p.get("time"))),
        operation,
        d.getString("key").getValue(),
        doc(d.get("documentKey")),
        document,
        instant(d.get("time")),
        raw,
        state,
        changed,
        doc(d.get("before"))); // absent in what was parked before pre-images were kept
  }

  private static BsonValue time(Instant t) {
    // ISO-8601 string, not a BSON date: a date would cut the instant to milliseconds and the
    // replayed change would not be identical to the parked one.
    return t == null ? BsonNull.VALUE : new BsonString(t.toString());
  }

  private static Instant instant(BsonValue v) {
    return v == null || v.isNull() ? null : Instant.parse(v.asString().getValue());
  }

  private static BsonValue orNull(BsonDocument d) {
    return d == null ? BsonNull.VALUE : d;
  }

  private static BsonDocument doc(BsonValue v) {
    return v == null || v.isNull() ? null : v.asDocument();
  }
}
