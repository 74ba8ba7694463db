package dev.sluice.mongodb.fence;

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
 * newer one (seed 000, figure 3; {@code docs/adr/0013-mongodb-fenced-writes.md}).
 *
 * <p><b>Fenced by epoch</b> ({@link #updateOne}, {@link #replaceOne}): the target document
 * carries the epoch of the last write in {@value #FENCE_FIELD}; a write applies only while that
 * is at most the writer's epoch, and sets it to the writer's epoch. A write from an older epoch
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

  /** The field holding the epoch of the last fenced write. */
  String FENCE_FIELD = "_fence";

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
    Bson fenced = Updates.combine(update, Updates.set(FENCE_FIELD, fence.epoch()));
    boolean applied =
        upsertRace(
            () ->
                target.updateOne(
                    notNewer(id, fence.epoch()), fenced, new UpdateOptions().upsert(true)));
    fence.requireApplied(applied, describe(target, id));
  }

  /**
   * Replaces the document {@code _id = id} (creating it if absent) with {@code replacement} plus
   * {@value #FENCE_FIELD}, only if no write from a newer epoch was applied to it.
   *
   * @throws StaleFenceException if the document holds a write from a newer epoch
   */
  static void replaceOne(MongoCollection<?> target, Object id, Bson replacement, Fence fence) {
    Objects.requireNonNull(target, "target");
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(replacement, "replacement");
    Objects.requireNonNull(fence, "fence");
    MongoCollection<BsonDocument> docs = target.withDocumentClass(BsonDocument.class);
    BsonDocument doc =
        replacement.toBsonDocument(BsonDocument.class, docs.getCodecRegistry()).clone();
    doc.put(FENCE_FIELD, new BsonInt64(fence.epoch()));
    boolean applied =
        upsertRace(
            () ->
                docs.replaceOne(
                    notNewer(id, fence.epoch()), doc, new ReplaceOptions().upsert(true)));
    fence.requireApplied(applied, describe(target, id));
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
    return upsertRace(
        () -> target.updateOne(filter, versioned, new UpdateOptions().upsert(true)));
  }

  private static Bson notNewer(Object id, long epoch) {
    return and(eq("_id", id), or(exists(FENCE_FIELD, false), lte(FENCE_FIELD, epoch)));
  }

  /**
   * Runs a conditional upsert. No match plus a duplicate key on the insert means the document
   * exists but fails the condition, or a concurrent writer created it a moment ago: try again
   * against that document. The second duplicate key proves the condition fails.
   */
  private static boolean upsertRace(Supplier<UpdateResult> write) {
    for (int attempt = 1; ; attempt++) {
      try {
        UpdateResult r = write.get();
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
