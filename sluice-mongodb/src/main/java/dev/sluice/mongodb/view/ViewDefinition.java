package dev.sluice.mongodb.view;

import java.util.List;

/**
 * A declared materialized view: which target collection is maintained from which source
 * collections. Two shapes cover the usual joins:
 *
 * <ul>
 *   <li>{@link JoinView}: one target document per root document (an order), carrying the root's
 *       fields and the fields of the documents it references (its customer's name and tier);
 *   <li>{@link AggregateView}: one target document per group (a customer), carrying the group
 *       owner's fields and the count and total of the member documents pointing at it (orders).
 * </ul>
 *
 * Every source document must carry a version field (a number that increases with every write,
 * default {@code version}); it guards the target against older data (ADR 0031).
 */
public sealed interface ViewDefinition permits JoinView, AggregateView {

  /** The target collection. */
  String target();

  /** The source collections, in declaration order; each needs a listener (or a feed) feeding it. */
  List<String> sources();

  /** The version field every source document must carry. */
  String versionField();

  /** Starts a {@link JoinView}: one target document per document of {@code root}. */
  static JoinView.Builder join(String target) {
    return new JoinView.Builder(target);
  }

  /** Starts an {@link AggregateView}: one target document per group. */
  static AggregateView.Builder aggregate(String target) {
    return new AggregateView.Builder(target);
  }
}
