package dev.sluice.mongodb.view;

import dev.sluice.mongodb.internal.MongoReads;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import dev.sluice.ConfigurationException;
import dev.sluice.SluiceException;
import dev.sluice.feed.ChangeEvent;
import dev.sluice.feed.Operation;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** What both view shapes share: the handler, the recompute-and-write loop, rebuild bookkeeping. */
abstract class AbstractMaintainer<V extends ViewDefinition> implements MaterializedView {
  private static final Logger LOG = LoggerFactory.getLogger(MaterializedView.class);
  /** Each retry follows a concurrent write that read newer sources; this many means a hot loop. */
  static final int MAX_ATTEMPTS = 50;

  /** A test seam between reading the sources and writing the target (figure 3). */
  interface Probe {
    void afterRead(BsonValue targetId, Fence fence);
  }

  /** A recomputed target: its content ({@code null}: no document) and the versions it read. */
  record Computed(BsonDocument content, List<TargetWriter.SourceVersion> versions) {}

  final MongoDatabase db;
  final V def;
  final String view;
  final String versionField;
  final TargetWriter writer;
  final Clock clock;
  private volatile Probe probe = (id, fence) -> {};

  AbstractMaintainer(MongoDatabase db, V def, List<String> managed, Clock clock) {
    this.db = db;
    this.def = def;
    this.view = def.target();
    this.versionField = def.versionField();
    this.clock = clock;
    this.writer = new TargetWriter(db, def.target(), managed, clock);
  }

  void probe(Probe probe) {
    this.probe = Objects.requireNonNull(probe);
  }

  /** A source collection of the view, read on the primary at majority (docs/adr/0058). */
  MongoCollection<BsonDocument> collection(String name) {
    return MongoReads.sources(db.getCollection(name, BsonDocument.class));
  }

  @Override
  public V definition() {
    return def;
  }

  @Override
  public MongoCollection<BsonDocument> target() {
    return writer.target();
  }

  @Override
  public Handler<BsonDocument> handler(String source) {
    requireSource(source);
    return (event, fence) -> onChange(source, event, fence);
  }

  private void onChange(String source, ChangeEvent<BsonDocument> event, Fence fence) {
    if (event.operation() == Operation.OTHER) {
      // A drop or rename of a source: no document to recompute; only a rebuild repairs the view.
      LOG.warn(
          "View '{}': change {} of source {} names no document; rebuild the view if the source was"
              + " dropped or renamed",
          view,
          event,
          source);
      return;
    }
    refresh(source, documentId(source, event), fence);
  }

  /**
   * The changed document's _id. The full document is preferred: mongo-java-server puts the update
   * document into documentKey of update events, while real MongoDB's documentKey is right.
   */
  private BsonValue documentId(String source, ChangeEvent<BsonDocument> event) {
    if (event.document() != null && event.document().containsKey("_id")) {
      return event.document().get("_id");
    }
    if (event.documentKey() != null && event.documentKey().containsKey("_id")) {
      return event.documentKey().get("_id");
    }
    throw new ViewException(
        "View '" + view + "': change " + event + " of " + source + " carries no document _id");
  }

  /** Copies into {@code into} those of {@code fields} that {@code from} has; returns {@code into}. */
  static BsonDocument copy(BsonDocument from, List<String> fields, BsonDocument into) {
    for (String f : fields) {
      if (from.containsKey(f)) {
        into.put(f, from.get(f));
      }
    }
    return into;
  }

  void requireSource(String source) {
    if (!def.sources().contains(source)) {
      throw new ConfigurationException(
          "source '" + source + "' is not a source of view '" + view + "' " + def.sources());
    }
  }

  /** What {@link #refresh} requires of its arguments: a source of the view, and an id. */
  void requireSource(String source, BsonValue id) {
    requireSource(source);
    Objects.requireNonNull(id, "id");
  }

  /** Recomputes one target until a write is applied or superseded by a later read. */
  void refreshTarget(BsonValue targetId, Fence fence) {
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      long ticket = writer.ticket(targetId);
      Computed computed = compute(targetId);
      probe.afterRead(targetId, fence);
      if (writer.write(targetId, ticket, computed.content(), computed.versions(), fence)
          != TargetWriter.Result.RETRY) {
        return;
      }
    }
    throw new SluiceException(
        "View '"
            + view
            + "': target _id="
            + ViewException.render(targetId)
            + " was rejected "
            + MAX_ATTEMPTS
            + " times by concurrent writes that read older sources; giving up for now");
  }

  /** Recomputes target {@code targetId} from the current sources. */
  abstract Computed compute(BsonValue targetId);

  long version(String collection, BsonDocument doc) {
    BsonValue id = doc.get("_id");
    if (!doc.containsKey(versionField)) {
      throw ViewException.missingField(view, collection, id, versionField, "version field");
    }
    BsonValue v = doc.get(versionField);
    if (!v.isNumber()) {
      throw ViewException.wrongType(view, collection, id, versionField, "version field", v);
    }
    return v.asNumber().longValue();
  }

  BsonValue key(String collection, BsonDocument doc, String field, String role) {
    if (!doc.containsKey(field)) {
      throw ViewException.missingField(view, collection, doc.get("_id"), field, role);
    }
    return doc.get(field);
  }

  BsonDocument find(String collection, BsonValue id) {
    return collection(collection).find(Filters.eq("_id", id)).first();
  }

  /** Runs {@code refresh} over {@code ids}, collecting per-document errors instead of stopping. */
  long refreshAll(Iterable<BsonValue> ids, java.util.function.Consumer<BsonValue> refresh,
      List<String> errors) {
    long n = 0;
    for (BsonValue id : ids) {
      try {
        refresh.accept(id);
        n++;
      } catch (ViewException e) {
        errors.add(e.getMessage());
      }
    }
    return n;
  }

  static void throwIfErrors(String view, List<String> errors) {
    if (!errors.isEmpty()) {
      List<String> shown = errors.subList(0, Math.min(10, errors.size()));
      throw new ViewException(
          "View '" + view + "' rebuilt except " + errors.size() + " source document(s): "
              + String.join("; ", shown) + (errors.size() > shown.size() ? "; ..." : ""));
    }
  }

  static List<BsonValue> ids(Iterable<BsonDocument> docs) {
    List<BsonValue> ids = new ArrayList<>();
    docs.forEach(d -> ids.add(d.get("_id")));
    return ids;
  }

  @Override
  public long pruneTombstones(Duration olderThan) {
    ConfigurationException.requireNonNull(olderThan, "olderThan");
    ConfigurationException.require(!olderThan.isNegative(), "olderThan", olderThan, "must be >= 0");
    return writer.pruneTombstones(olderThan);
  }
}
