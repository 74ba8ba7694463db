package dev.sluice.mongodb.fence;

import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.internal.ShardedTargets;
import static com.mongodb.client.model.Filters.and;
import static com.mongodb.client.model.Filters.eq;
import static com.mongodb.client.model.Filters.exists;
import static com.mongodb.client.model.Filters.lt;
import static com.mongodb.client.model.Filters.lte;
import static com.mongodb.client.model.Filters.or;

import com.mongodb.MongoCommandException;
import com.mongodb.MongoException;
import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.ReplaceOptions;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import com.mongodb.client.result.UpdateResult;
import dev.sluice.listener.Fence;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.mongodb.internal.MongoErrors;
import java.util.Objects;
import java.util.function.Supplier;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.conversions.Bson;

/**
 * Conditional writes for handlers, so that a write from a stale listener can never overwrite a
 * newer one ({@code docs/adr/0013-mongodb-fenced-writes.md}).
 *
 * <p><b>Fenced by epoch</b> ({@link #updateOne}, {@link #replaceOne}): the target document
 * carries, per lease, the epoch of the last write in {@code _fence.<lease>}; a write applies only
 * while that is at most the writer's epoch, and sets it to the writer's epoch. Epochs are only
 * comparable within one lease, so each lease has its own entry: a document written by two
 * streams (a summary of orders and of refunds), or by a key that moved partition, keeps one
 * fence per writer and never compares the epochs of different leases. A write from an older epoch
 * throws {@link StaleFenceException}, which makes the engine stop the partition at once. Absent
 * documents are created (upsert); if two writers race to create one, the loser of the insert
 * retries against the winner's fence, so a newer epoch never loses to an older one.
 *
 * <p><b>Guarded by source version</b> ({@link #updateIfNewer}): the target keeps the version of
 * the source it was last written from; a write applies only with a strictly newer version. An
 * equal or older version returns {@code false} instead of throwing: after a takeover the new
 * owner replays from the checkpoint and meets versions the previous owner already applied,
 * which is no sign of a lost lease. Call {@link Fence#requireApplied} on the result to stop like
 * the seed does.
 *
 * <p>Never delete a fenced document: a stale writer could re-create it. Mark it deleted with an
 * update instead.
 */
public interface FencedWrites {

  /** The field holding, per lease, the epoch of the last fenced write: {@code _fence.<lease>}. */
  String FENCE_FIELD = "_fence";

  /**
   * Refuses, at start, a target collection these writes cannot use: one sharded on a key other
   * than {@code _id}, which cannot route their upserts by {@code _id} (ADR 0060). Call it where the
   * application starts its listeners; without it such a target is refused at its first write.
   *
   * @throws dev.sluice.ConfigurationException naming the collection and the fix
   */
  static void requireTarget(com.mongodb.client.MongoDatabase database, String collection) {
    ShardedTargets.requireUpsertsById(database, collection);
  }

  /**
   * The path of {@code lease}'s entry in {@value #FENCE_FIELD}: the lease name with {@code %},
   * {@code .} and {@code $} escaped, since they are path separators or reserved in field names.
   */
  static String fencePath(String lease) {
    Objects.requireNonNull(lease, "lease");
    String key = lease.replace("%", "%25").replace(".", "%2E").replace("$", "%24");
    return FENCE_FIELD + "." + key;
  }

  /** The epoch of {@code lease}'s last fenced write recorded in {@code document}, or -1 if none. */
  static long fencedEpoch(org.bson.Document document, String lease) {
    Object fences = document.get(FENCE_FIELD);
    if (!(fences instanceof org.bson.Document d)) {
      return -1;
    }
    Object epoch = d.get(fencePath(lease).substring(FENCE_FIELD.length() + 1));
    return epoch instanceof Number n ? n.longValue() : -1;
  }

  /**
   * Applies {@code update} to the document {@code _id = id} (creating it if absent) only if no
   * write from a newer epoch was applied to it; records {@code fence.epoch()} in {@value
   * #FENCE_FIELD}. {@code update} must not touch {@value #FENCE_FIELD}.
   *
   * @throws StaleFenceException if the document holds a write from a newer epoch
   */
  static void updateOne(MongoCollection<?> target, Object id, Bson update, Fence fence) {
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(update, "update");
    Objects.requireNonNull(fence, "fence");
    String path = fencePath(fence.lease());
    Bson fenced = Updates.combine(update, Updates.set(path, fence.epoch()));
    boolean applied =
        upsertRace(target,
            () ->
                MongoReads.bounded(target).updateOne(
                    notNewer(id, path, fence.epoch()), fenced, new UpdateOptions().upsert(true)));
    fence.requireApplied(applied, describe(target, id));
  }

  /**
   * Replaces the document {@code _id = id} (creating it if absent) with {@code replacement} plus
   * {@value #FENCE_FIELD}, only if no write from a newer epoch of this lease was applied to it.
   * The other leases' fence entries are kept: the replacement is a compare-and-swap on the whole
   * {@value #FENCE_FIELD} document, retried when another writer changed it in between.
   *
   * @throws StaleFenceException if the document holds a write from a newer epoch
   */
  static void replaceOne(MongoCollection<?> target, Object id, Bson replacement, Fence fence) {
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(replacement, "replacement");
    Objects.requireNonNull(fence, "fence");
    MongoCollection<BsonDocument> docs = MongoReads.primary(target.withDocumentClass(BsonDocument.class));
    BsonDocument doc =
        replacement.toBsonDocument(BsonDocument.class, docs.getCodecRegistry()).clone();
    String path = fencePath(fence.lease());
    String key = path.substring(FENCE_FIELD.length() + 1);
    while (true) {
      BsonDocument current = docs.find(eq("_id", id)).projection(new BsonDocument(FENCE_FIELD,
          new org.bson.BsonInt32(1))).first();
      BsonDocument fences = current != null && current.get(FENCE_FIELD) instanceof BsonDocument f
          ? f.clone() : new BsonDocument();
      org.bson.BsonValue mine = fences.get(key);
      if (mine != null && mine.isNumber() && mine.asNumber().longValue() > fence.epoch()) {
        fence.requireApplied(false, describe(target, id));
      }
      fences.put(key, new BsonInt64(fence.epoch()));
      doc.put(FENCE_FIELD, fences);
      Bson unchanged = current == null
          ? and(eq("_id", id), exists(FENCE_FIELD, false))
          : and(eq("_id", id), current.containsKey(FENCE_FIELD)
              ? eq(FENCE_FIELD, current.get(FENCE_FIELD)) : exists(FENCE_FIELD, false));
      // A miss means someone wrote in between (or created the document): read again and retry.
      if (upsertRace(target, () -> docs.replaceOne(unchanged, doc, new ReplaceOptions().upsert(true)))) {
        return;
      }
    }
  }

  /**
   * Applies {@code update} to the document {@code _id = id} (creating it if absent) only if its
   * {@code versionField} is absent or lower than {@code version}, and sets it to {@code version}.
   *
   * @return true if applied; false if the document already holds this or a newer version
   */
  static boolean updateIfNewer(
      MongoCollection<?> target, Object id, String versionField, long version, Bson update) {
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(versionField, "versionField");
    Objects.requireNonNull(update, "update");
    Bson filter = and(eq("_id", id), or(exists(versionField, false), lt(versionField, version)));
    Bson versioned = Updates.combine(update, Updates.set(versionField, version));
    return upsertRace(target,
        () -> MongoReads.bounded(target).updateOne(filter, versioned, new UpdateOptions().upsert(true)));
  }

  private static Bson notNewer(Object id, String path, long epoch) {
    return and(eq("_id", id), or(exists(path, false), lte(path, epoch)));
  }

  /**
   * Runs a conditional upsert. No match plus a duplicate key on the insert means the document
   * exists but fails the condition, or a concurrent writer created it a moment ago: try again
   * against that document. The second duplicate key proves the condition fails. A target sharded
   * on another key than {@code _id} is refused with a clear error (ADR 0060).
   */
  private static boolean upsertRace(MongoCollection<?> target, Supplier<UpdateResult> write) {
    for (int attempt = 1; ; attempt++) {
      try {
        UpdateResult r = ShardedTargets.upsert(target, write);
        return r.getMatchedCount() > 0 || r.getUpsertedId() != null;
      } catch (MongoException e) {
        if (!MongoErrors.isDuplicateKey(e)) {
          throw e;
        }
        if (attempt >= 2) {
          return false;
        }
      }
    }
  }


  private static String describe(MongoCollection<?> target, Object id) {
    return target.getNamespace() + " _id=" + id;
  }
}
