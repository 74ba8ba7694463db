package dev.sluice.mongodb.view;

import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Projections;
import dev.sluice.listener.Fence;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.bson.BsonDocument;
import org.bson.BsonNull;
import org.bson.BsonValue;

final class JoinMaintainer extends AbstractMaintainer<JoinView> {

  JoinMaintainer(MongoDatabase db, JoinView def, Clock clock) {
    super(db, def, def.managedFields(), clock);
  }

  @Override
  public void refresh(String source, BsonValue id, Fence fence) {
    requireSource(source, id);
    if (source.equals(def.root())) {
      refreshTarget(id, fence);
      return;
    }
    // Fail on a bad source document at the change that introduced it, not at some later join.
    BsonDocument changed = find(source, id);
    if (changed != null) {
      version(source, changed);
    }
    for (Lookup l : def.lookups()) {
      if (l.collection().equals(source)) {
        // Roots pointing at it now. A root that pointed at it before and moved away is
        // recomputed by the change that moved it.
        for (BsonDocument root :
            collection(def.root())
                .find(Filters.eq(l.localField(), id))
                .projection(Projections.include("_id"))) {
          refreshTarget(root.get("_id"), fence);
        }
      }
    }
  }

  @Override
  Computed compute(BsonValue targetId) {
    BsonDocument root = find(def.root(), targetId);
    if (root == null) {
      return new Computed(null, List.of());
    }
    List<TargetWriter.SourceVersion> versions = new ArrayList<>();
    versions.add(new TargetWriter.SourceVersion(def.root(), targetId, version(def.root(), root)));
    BsonDocument content = copy(root, def.fields(), new BsonDocument());
    for (Lookup l : def.lookups()) {
      BsonValue key = key(def.root(), root, l.localField(), "key of the lookup of " + l.collection());
      BsonDocument ref = key.isNull() ? null : find(l.collection(), key);
      if (ref == null) {
        content.put(l.as(), BsonNull.VALUE);
        continue;
      }
      versions.add(new TargetWriter.SourceVersion(l.collection(), key, version(l.collection(), ref)));
      content.put(l.as(), copy(ref, l.fields(), new BsonDocument()));
    }
    return new Computed(content, versions);
  }

  @Override
  public long rebuild() {
    Set<BsonValue> ids = new LinkedHashSet<>();
    ids.addAll(ids(collection(def.root()).find().projection(Projections.include("_id"))));
    // Live targets whose root is gone (a delete the listeners never saw) become tombstones.
    ids.addAll(ids(target().find(MaterializedView.live()).projection(Projections.include("_id"))));
    List<String> errors = new ArrayList<>();
    long n = refreshAll(ids, id -> refreshTarget(id, null), errors);
    throwIfErrors(view, errors);
    return n;
  }
}
