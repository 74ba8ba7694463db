package dev.sluice.mongodb.view;

import dev.sluice.mongodb.internal.MongoReads;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Indexes;
import com.mongodb.client.model.Projections;
import com.mongodb.client.model.Updates;
import dev.sluice.listener.Fence;
import dev.sluice.mongodb.internal.MongoErrors;
import java.math.BigDecimal;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.bson.BsonArray;
import org.bson.BsonBoolean;
import org.bson.BsonDateTime;
import org.bson.BsonDecimal128;
import org.bson.BsonDocument;
import org.bson.BsonDouble;
import org.bson.BsonInt64;
import org.bson.BsonNull;
import org.bson.BsonValue;
import org.bson.types.Decimal128;

/**
 * Aggregates are recomputed, never incremented, so redelivery cannot double-count. Finding the
 * group a member left (re-keying, deletion) needs the member's previous group, which a change
 * event does not carry (no pre-images on the embedded server, optional on MongoDB 6+): a side
 * collection {@code <target>_sluice_members} records, per member, its group, its value and the
 * groups it left that still await recomputation (ADR 0033). Aggregates are computed from that
 * collection, which is itself refreshed from the source on every member change.
 */
final class AggregateMaintainer extends AbstractMaintainer<AggregateView> {
  private static final String GROUP = "group";
  private static final String PENDING = "pending";
  private static final String VALUE = "value";
  private static final String VERSION = "v";
  private static final String DELETED = "deleted";
  private static final String REV = "rev";

  private final MongoCollection<BsonDocument> membership;

  AggregateMaintainer(MongoDatabase db, AggregateView def, Clock clock) {
    super(db, def, def.managedFields(), clock);
    this.membership = MongoReads.ownRecords(db.getCollection(def.target() + "_sluice_members", BsonDocument.class));
    membership.createIndex(Indexes.ascending(GROUP, DELETED));
  }

  @Override
  public void refresh(String source, BsonValue id, Fence fence) {
    requireSource(source, id);
    if (source.equals(def.owner())) {
      BsonDocument owner = find(source, id);
      if (owner != null) {
        version(source, owner);
      }
      refreshTarget(id, fence);
      return;
    }
    MembershipChange change = refreshMembership(id);
    for (BsonValue group : change.groups()) {
      refreshTarget(group, fence);
    }
    clearPending(id, change);
  }

  /** Groups to recompute after a membership write, and the revision that listed them. */
  private record MembershipChange(Set<BsonValue> groups, List<BsonValue> pending, long rev) {}

  /**
   * Brings member {@code id}'s membership record in line with the source: read the record, then
   * the source (so the source read is the newer one), then compare-and-set on the record's
   * revision; a concurrent writer makes us start over.
   */
  private MembershipChange refreshMembership(BsonValue id) {
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      BsonDocument before = membership.find(Filters.eq("_id", id)).first();
      BsonDocument source = find(def.members(), id);
      BsonDocument after = nextState(id, before, source);
      long rev = before == null ? 0 : before.getNumber(REV).longValue();
      boolean written;
      if (after == null) {
        written = true; // nothing recorded and nothing to record
      } else if (before != null && sameState(before, after)) {
        written = true; // a redelivery: still recompute what the record names
        after = before;
      } else {
        after.put(REV, new BsonInt64(rev + 1));
        written = compareAndSet(id, before, after, rev);
        rev++;
      }
      if (!written) {
        continue;
      }
      if (after == null) {
        return new MembershipChange(Set.of(), List.of(), rev);
      }
      Set<BsonValue> groups = new LinkedHashSet<>();
      if (!after.get(GROUP).isNull()) {
        groups.add(after.get(GROUP));
      }
      List<BsonValue> pending = after.getArray(PENDING).getValues();
      groups.addAll(pending);
      return new MembershipChange(groups, pending, rev);
    }
    throw new dev.sluice.SluiceException(
        "View '" + view + "': membership of " + def.members() + "/_id=" + ViewException.render(id)
            + " changed concurrently " + MAX_ATTEMPTS + " times in a row; giving up for now");
  }

  private BsonDocument nextState(BsonValue id, BsonDocument before, BsonDocument source) {
    Set<BsonValue> pending = new LinkedHashSet<>();
    if (before != null) {
      pending.addAll(before.getArray(PENDING).getValues());
    }
    if (source == null) {
      if (before == null) {
        return null;
      }
      if (!before.get(GROUP).isNull()) {
        pending.add(before.get(GROUP));
      }
      return new BsonDocument(GROUP, BsonNull.VALUE)
          .append(PENDING, new BsonArray(new ArrayList<>(pending)))
          .append(VALUE, BsonNull.VALUE)
          .append(VERSION, before.get(VERSION))
          .append(DELETED, BsonBoolean.TRUE)
          .append("deletedAt", before.getBoolean(DELETED).getValue()
              ? before.get("deletedAt")
              : new BsonDateTime(clock.millis()));
    }
    long version = version(def.members(), source);
    BsonValue group = key(def.members(), source, def.groupField(), "group key");
    BsonValue value = BsonNull.VALUE;
    if (def.sumOf() != null) {
      value = key(def.members(), source, def.sumOf(), "summed field");
      if (!value.isNumber() && !value.isDecimal128()) {
        throw ViewException.wrongType(
            view, def.members(), id, def.sumOf(), "summed field", value);
      }
    }
    if (before != null && !before.get(GROUP).isNull() && !before.get(GROUP).equals(group)) {
      pending.add(before.get(GROUP));
    }
    pending.remove(group);
    return new BsonDocument(GROUP, group)
        .append(PENDING, new BsonArray(new ArrayList<>(pending)))
        .append(VALUE, value)
        .append(VERSION, new BsonInt64(version))
        .append(DELETED, BsonBoolean.FALSE);
  }

  private static boolean sameState(BsonDocument before, BsonDocument after) {
    for (String f : List.of(GROUP, PENDING, VALUE, DELETED)) {
      if (!Objects.equals(before.get(f), after.get(f))) {
        return false;
      }
    }
    return before.getNumber(VERSION).longValue() == after.getNumber(VERSION).longValue();
  }

  private boolean compareAndSet(BsonValue id, BsonDocument before, BsonDocument after, long rev) {
    if (before == null) {
      try {
        membership.insertOne(after.clone().append("_id", id));
        return true;
      } catch (com.mongodb.MongoWriteException e) {
        if (MongoErrors.isDuplicateKey(e)) {
          return false;
        }
        throw e;
      }
    }
    List<org.bson.conversions.Bson> sets = new ArrayList<>();
    after.forEach((k, v) -> sets.add(Updates.set(k, v)));
    if (!after.containsKey("deletedAt")) {
      sets.add(Updates.unset("deletedAt"));
    }
    return membership
            .updateOne(
                Filters.and(Filters.eq("_id", id), Filters.eq(REV, rev)), Updates.combine(sets))
            .getMatchedCount()
        == 1;
  }

  /** Forgets the groups just recomputed, unless the record changed meanwhile (then keep them). */
  private void clearPending(BsonValue id, MembershipChange change) {
    if (change.pending().isEmpty()) {
      return;
    }
    membership.updateOne(
        Filters.and(Filters.eq("_id", id), Filters.eq(REV, change.rev())),
        Updates.combine(
            Updates.pullAll(PENDING, change.pending()), Updates.inc(REV, 1L)));
  }

  @Override
  Computed compute(BsonValue group) {
    BsonDocument owner = find(def.owner(), group);
    List<TargetWriter.SourceVersion> versions = new ArrayList<>();
    BsonDocument content = new BsonDocument();
    if (owner != null) {
      versions.add(new TargetWriter.SourceVersion(def.owner(), group, version(def.owner(), owner)));
      copy(owner, def.ownerFields(), content);
    }
    long count = 0;
    Sum sum = new Sum();
    for (BsonDocument m :
        membership
            .find(Filters.and(Filters.eq(GROUP, group), Filters.eq(DELETED, false)))
            .projection(Projections.include(VALUE))) {
      count++;
      sum.add(m.get(VALUE));
    }
    if (owner == null && count == 0) {
      return new Computed(null, versions);
    }
    content.put(def.countField(), new BsonInt64(count));
    if (def.sumField() != null) {
      content.put(def.sumField(), sum.value());
    }
    return new Computed(content, versions);
  }

  /** Sums integers exactly as a long, and switches to double or decimal if a member has one. */
  private static final class Sum {
    private long longSum;
    private BigDecimal exact = BigDecimal.ZERO;
    private boolean hasDouble;
    private boolean hasDecimal;

    void add(BsonValue v) {
      if (v.isInt32() || v.isInt64()) {
        longSum = Math.addExact(longSum, v.asNumber().longValue());
        exact = exact.add(BigDecimal.valueOf(v.asNumber().longValue()));
      } else if (v.isDouble()) {
        hasDouble = true;
        exact = exact.add(BigDecimal.valueOf(v.asDouble().getValue()));
      } else if (v.isDecimal128()) {
        hasDecimal = true;
        exact = exact.add(v.asDecimal128().getValue().bigDecimalValue());
      }
    }

    BsonValue value() {
      if (hasDecimal) {
        return new BsonDecimal128(new Decimal128(exact));
      }
      if (hasDouble) {
        return new BsonDouble(exact.doubleValue());
      }
      return new BsonInt64(longSum);
    }
  }

  @Override
  public long rebuild() {
    List<String> errors = new ArrayList<>();
    Set<BsonValue> members = new LinkedHashSet<>();
    members.addAll(ids(collection(def.members()).find().projection(Projections.include("_id"))));
    members.addAll(
        ids(membership.find(Filters.eq(DELETED, false)).projection(Projections.include("_id"))));
    Set<BsonValue> groups = new LinkedHashSet<>();
    List<Runnable> clears = new ArrayList<>();
    for (BsonValue id : members) {
      try {
        MembershipChange change = refreshMembership(id);
        groups.addAll(change.groups());
        clears.add(() -> clearPending(id, change));
      } catch (ViewException e) {
        errors.add(e.getMessage());
      }
    }
    groups.addAll(ids(collection(def.owner()).find().projection(Projections.include("_id"))));
    groups.addAll(ids(target().find(MaterializedView.live()).projection(Projections.include("_id"))));
    long n = refreshAll(groups, g -> refreshTarget(g, null), errors);
    clears.forEach(Runnable::run);
    throwIfErrors(view, errors);
    return n;
  }

  @Override
  public long pruneTombstones(java.time.Duration olderThan) {
    long pruned = super.pruneTombstones(olderThan);
    // Membership tombstones only serve to name the group a deleted member left; once that group
    // was recomputed (pending empty) and the horizon passed, they can go.
    pruned +=
        membership
            .deleteMany(
                Filters.and(
                    Filters.eq(DELETED, true),
                    Filters.size(PENDING, 0),
                    Filters.lt(
                        "deletedAt", new BsonDateTime(clock.millis() - olderThan.toMillis()))))
            .getDeletedCount();
    return pruned;
  }
}
