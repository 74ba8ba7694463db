package dev.sluice.mongodb.view;

import dev.sluice.mongodb.internal.MongoReads;
import dev.sluice.mongodb.internal.ShardedTargets;
import static dev.sluice.mongodb.view.ViewNames.META;

import com.mongodb.MongoWriteException;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.FindOneAndUpdateOptions;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.ReturnDocument;
import com.mongodb.client.model.UpdateOptions;
import com.mongodb.client.model.Updates;
import dev.sluice.listener.Fence;
import dev.sluice.listener.StaleFenceException;
import dev.sluice.mongodb.internal.MongoErrors;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bson.BsonDateTime;
import org.bson.BsonDocument;
import org.bson.BsonInt64;
import org.bson.BsonValue;
import org.bson.conversions.Bson;

/**
 * Writes recomputed target documents with three guards in one conditional upsert (ADR 0031):
 *
 * <ol>
 *   <li>ticket: a per-target counter taken before the sources are read; a write is applied only
 *       if no write with a higher ticket was, so recomputations commute and the one that read
 *       last wins. Tickets live in a side collection so the target holds only view documents;
 *   <li>source versions: an older version of a source document never replaces a newer one;
 *   <li>fence: a write from an older epoch of a lease is rejected once a newer epoch wrote, and
 *       raises {@link StaleFenceException} (the stale listener stops; docs/adr/0013).
 * </ol>
 *
 * Deleted targets stay as tombstones ({@code _sluice.deleted: true}) so a stale recomputation
 * cannot resurrect them; {@link #pruneTombstones} bounds them.
 */
final class TargetWriter {
  enum Result {
    APPLIED,
    /** A write with a higher ticket was already applied: it read the sources after us. */
    SUPERSEDED,
    /** Rejected by a version guard or an insert race: recompute with a new ticket. */
    RETRY
  }

  /** The version of one source document a recomputation read. */
  record SourceVersion(String collection, BsonValue id, long version) {}

  static final String TICKET = META + ".ticket";
  static final String DELETED = META + ".deleted";
  static final String DELETED_AT = META + ".deletedAt";

  private final String view;
  private final MongoCollection<BsonDocument> target;
  private final MongoCollection<BsonDocument> tickets;
  private final List<String> managedFields;
  private final Clock clock;

  TargetWriter(MongoDatabase db, String view, List<String> managedFields, Clock clock) {
    this.view = view;
    ShardedTargets.requireUpsertsById(db, view);
    this.target = MongoReads.ownRecords(db.getCollection(view, BsonDocument.class));
    this.tickets = MongoReads.ownRecords(db.getCollection(view + "_sluice_tickets", BsonDocument.class));
    this.managedFields = List.copyOf(managedFields);
    this.clock = clock;
  }

  MongoCollection<BsonDocument> target() {
    return target;
  }

  /** Takes the next ticket of a target; must be called before reading the sources. */
  long ticket(BsonValue id) {
    for (int attempt = 0; ; attempt++) {
      try {
        BsonDocument doc =
            ShardedTargets.upsert(tickets, () -> tickets.findOneAndUpdate(
                Filters.eq("_id", id),
                Updates.inc("n", 1L),
                new FindOneAndUpdateOptions().upsert(true).returnDocument(ReturnDocument.AFTER)));
        return doc.getNumber("n").longValue();
      } catch (MongoWriteException | com.mongodb.MongoCommandException e) {
        // Two first tickets of one target raced on the insert; the loser retries as an update.
        if (!MongoErrors.isDuplicateKey(e) || attempt > 2) {
          throw e;
        }
      }
    }
  }

  /**
   * Writes {@code content} (the managed fields; {@code null} for "no target document") as target
   * {@code id} if every guard passes.
   */
  Result write(
      BsonValue id, long ticket, BsonDocument content, List<SourceVersion> versions, Fence fence) {
    List<Bson> guards = new ArrayList<>();
    guards.add(Filters.eq("_id", id));
    guards.add(Filters.or(Filters.exists(TICKET, false), Filters.lt(TICKET, ticket)));
    List<Bson> updates = new ArrayList<>();
    updates.add(Updates.set(TICKET, new BsonInt64(ticket)));
    for (SourceVersion sv : versions) {
      String path = META + ".v." + ViewNames.escape(sv.collection());
      // A guard per source document identity: when the root now references another document,
      // the stored version of the previous one says nothing about the new one.
      guards.add(Filters.or(Filters.ne(path + ".id", sv.id()), Filters.lte(path + ".v", sv.version())));
      updates.add(
          Updates.set(
              path, new BsonDocument("id", sv.id()).append("v", new BsonInt64(sv.version()))));
    }
    String fencePath = fence == null ? null : META + ".fence." + ViewNames.escape(fence.lease());
    if (fence != null) {
      guards.add(Filters.or(Filters.exists(fencePath, false), Filters.lte(fencePath, fence.epoch())));
      updates.add(Updates.set(fencePath, new BsonInt64(fence.epoch())));
    }
    if (content == null) {
      managedFields.forEach(f -> updates.add(Updates.unset(f)));
      updates.add(Updates.set(DELETED, true));
      updates.add(Updates.set(DELETED_AT, new BsonDateTime(clock.millis())));
    } else {
      for (String f : managedFields) {
        updates.add(content.containsKey(f) ? Updates.set(f, content.get(f)) : Updates.unset(f));
      }
      updates.add(Updates.set(DELETED, false));
      updates.add(Updates.unset(DELETED_AT));
    }
    try {
      ShardedTargets.upsert(target, () -> target.updateOne(
          Filters.and(guards), Updates.combine(updates), new UpdateOptions().upsert(true)));
      return Result.APPLIED;
    } catch (MongoWriteException e) {
      if (!MongoErrors.isDuplicateKey(e)) {
        throw e;
      }
    }
    // The target exists and a guard failed (or a concurrent first write won the insert): find out
    // which, reading after the failure; every guarded value only ever grows, so this is sound.
    BsonDocument stored =
        target.find(Filters.eq("_id", id)).projection(Projections.include(META)).first();
    if (stored == null || !stored.isDocument(META)) {
      return Result.RETRY;
    }
    BsonDocument meta = stored.getDocument(META);
    if (fence != null) {
      BsonValue epoch = meta.isDocument("fence")
          ? meta.getDocument("fence").get(ViewNames.escape(fence.lease()))
          : null;
      if (epoch != null && epoch.isNumber() && epoch.asNumber().longValue() > fence.epoch()) {
        throw new StaleFenceException(fence, view + "/_id=" + ViewException.render(id));
      }
    }
    if (meta.isNumber("ticket") && meta.getNumber("ticket").longValue() >= ticket) {
      return Result.SUPERSEDED;
    }
    return Result.RETRY;
  }

  long pruneTombstones(Duration olderThan) {
    long cutoff = clock.millis() - olderThan.toMillis();
    return target
        .deleteMany(
            Filters.and(Filters.eq(DELETED, true), Filters.lt(DELETED_AT, new BsonDateTime(cutoff))))
        .getDeletedCount();
  }
}
