package dev.sluice.mongodb.view;

import com.mongodb.client.MongoCollection;
import com.mongodb.client.MongoDatabase;
import com.mongodb.client.model.Filters;
import dev.sluice.ConfigurationException;
import dev.sluice.listener.Fence;
import dev.sluice.listener.Handler;
import java.time.Clock;
import java.time.Duration;
import org.bson.BsonDocument;
import org.bson.BsonValue;
import org.bson.conversions.Bson;

/**
 * Maintains a declared {@link ViewDefinition} in MongoDB from the changes of its source
 * collections: asynchronous denormalization, kept in sync as the sources change.
 *
 * <p>Every change only names a source document; the affected target documents are then
 * <em>recomputed from the current sources</em> (re-querying the join) and written with guarded
 * conditional updates. So a change delivered twice, late, or by a listener that lost its lease
 * never leaves the view wrong, and a {@link #rebuild()} may run while listeners keep running:
 * all writers commute (ADR 0031, ADR 0032).
 *
 * <pre>{@code
 * MaterializedView orders = MaterializedView.of(db, ViewDefinition.join("order_view")
 *     .root("orders", "customerId", "amount")
 *     .lookup("customers", "customerId", "customer", "name", "tier")
 *     .build());
 * // one listener per source collection, each with the view's handler for that source
 * Listener.builder(ordersFeed, leases).group("order-view").handler(orders.handler("orders")).build().start();
 * Listener.builder(customersFeed, leases).group("order-view").handler(orders.handler("customers")).build().start();
 * orders.target().find(MaterializedView.live());
 * }</pre>
 *
 * <p>Target documents carry a {@code _sluice} sub-document with the guards; a deleted target
 * stays as a tombstone ({@code _sluice.deleted: true}) until {@link #pruneTombstones}: query
 * with {@link #live()}.
 */
public interface MaterializedView {

  static MaterializedView of(MongoDatabase database, ViewDefinition definition) {
    return of(database, definition, Clock.systemUTC());
  }

  /** @param clock stamps tombstones, for {@link #pruneTombstones} */
  static MaterializedView of(MongoDatabase database, ViewDefinition definition, Clock clock) {
    ConfigurationException.requireNonNull(database, "database");
    ConfigurationException.requireNonNull(definition, "definition");
    ConfigurationException.requireNonNull(clock, "clock");
    if (definition instanceof JoinView join) {
      return new JoinMaintainer(database, join, clock);
    }
    return new AggregateMaintainer(database, (AggregateView) definition, clock);
  }

  /** Selects the live target documents (not tombstones). */
  static Bson live() {
    return Filters.ne(ViewNames.META + ".deleted", true);
  }

  /**
   * One handler for the listener of {@code source} that maintains every view in {@code views}
   * having {@code source} as a source, in order.
   *
   * @throws ConfigurationException if none of them has that source
   */
  static Handler<BsonDocument> handler(String source, java.util.List<MaterializedView> views) {
    ConfigurationException.requireNonNull(source, "source");
    ConfigurationException.requireNonNull(views, "views");
    java.util.List<Handler<BsonDocument>> handlers = new java.util.ArrayList<>();
    for (MaterializedView v : views) {
      if (v.definition().sources().contains(source)) {
        handlers.add(v.handler(source));
      }
    }
    ConfigurationException.require(
        !handlers.isEmpty(), "source", "'" + source + "'", "must be a source of at least one view");
    return (change, fence) -> {
      for (Handler<BsonDocument> h : handlers) {
        h.handle(change, fence);
      }
    };
  }

  /**
   * An observer for the listeners that maintain {@code views}: when one reports lost history
   * ({@code HistoryLostPolicy.SKIP_TO_LATEST} or {@code RESNAPSHOT}), every view is rebuilt on a
   * thread of its own, while the listeners go on. A document deleted during the gap is reported by
   * no change, so only a rebuild removes the targets that came from it (RESNAPSHOT repairs every
   * document that still exists). Reports from several partitions coalesce into one rebuild, and one
   * that comes while a rebuild runs gets another after it.
   *
   * <pre>{@code
   * Listener.builder(ordersFeed, leases).group("views").onHistoryLost(HistoryLostPolicy.RESNAPSHOT)
   *     .observer(MaterializedView.rebuildOnHistoryLost(views))
   *     .handler(MaterializedView.handler("orders", views)).build().start();
   * }</pre>
   */
  static dev.sluice.listener.ListenerObserver rebuildOnHistoryLost(java.util.List<MaterializedView> views) {
    ConfigurationException.requireNonNull(views, "views");
    return new HistoryLostRebuild(views);
  }

  ViewDefinition definition();

  /** The target collection. */
  MongoCollection<BsonDocument> target();

  /**
   * The handler for the listener of source collection {@code source}: recomputes every target
   * document the changed source document affects, with the change's fence.
   *
   * @throws ConfigurationException if {@code source} is not a source of this view
   */
  Handler<BsonDocument> handler(String source);

  /**
   * Recomputes the target documents affected by source document {@code id} of {@code source}.
   * What the handler does for one change; usable directly (after a bulk import, say).
   *
   * @param fence the listener's fence, or {@code null} for a write outside any listener
   * @throws ViewException if the source document lacks its version or key field
   * @throws dev.sluice.listener.StaleFenceException if a newer epoch of the same lease already
   *     wrote an affected target
   */
  void refresh(String source, BsonValue id, Fence fence);

  /**
   * Recomputes every target document from the current sources, including removing targets whose
   * sources are gone. Safe while listeners keep maintaining the view: each recomputation is
   * guarded like a live one, so whichever reads the sources last wins.
   *
   * @return how many target documents were recomputed
   * @throws ViewException after recomputing everything else, if some source documents lack
   *     their key or version field (the message lists them)
   */
  long rebuild();

  /**
   * Deletes tombstones older than {@code olderThan}. Choose it longer than any listener pause and
   * any rebuild: after pruning, a recomputation that read the sources before the deletion could
   * recreate the document (until the next change of it).
   *
   * @return how many tombstones were deleted
   */
  long pruneTombstones(Duration olderThan);
}
